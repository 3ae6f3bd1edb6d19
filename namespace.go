package claimcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Namespaces. A store URL may carry gocloud.dev/blob's standard prefix=
// parameter (s3://bucket?prefix=staging/&region=..., file:///dir?prefix=a/):
// every key the store writes or reads (payloads, results, probes, the
// ownership marker) then lives under that prefix, and everything that lists
// the store's bucket (sweep, doctor, verify) sees only what is inside it. A
// bucket may so hold several deployments, each with its own job database,
// without any of them seeing the others' objects as orphans.
//
// Which job database owns a namespace is recorded in the namespace itself,
// in the object NamespaceMarkerKey (written on first use, never replaced),
// and in the job database (pipeline.Open compares the two and refuses a
// database that does not own the namespace; see docs/invariants.md,
// invariant 6: only the owner's registry says which objects are live).

// NamespaceMarkerKey is the key, inside a store's namespace, of the object
// that records the job database owning the namespace. It is outside
// PrefixPayloads and PrefixResults, so no sweep ever lists it.
const NamespaceMarkerKey = "claimcheck-namespace.json"

// MaxNamespaceLen is the longest prefix= a store URL may carry, in bytes.
const MaxNamespaceLen = 128

// ErrNamespaceOwned is returned (wrapped, with ErrConfig) when a job
// database is pointed at a namespace another job database owns.
var ErrNamespaceOwned = errors.New("namespace owned by another job database")

// NamespaceOwner is what the ownership marker of a namespace records.
type NamespaceOwner struct {
	// DatabaseID is the owning job database's identity: random, made once
	// when the database is first migrated.
	DatabaseID string `json:"database_id"`
	// Database names the owning job database for people (its URL with
	// any password removed); DatabaseID, not this, decides ownership.
	Database string `json:"database"`
	// Created is when the marker was written, UTC.
	Created time.Time `json:"created"`
}

// ValidateNamespace checks a prefix= value and returns it ending in '/':
// 1 to MaxNamespaceLen bytes of segments of A-Z, a-z, 0-9, '-', '_', '.',
// separated by '/'. No segment may be "payloads" or "results": a namespace
// inside another's payload or result area would be swept by it. It returns
// a plain error describing the problem.
func ValidateNamespace(prefix string) (string, error) {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" {
		return "", errors.New("prefix is empty: leave prefix= out for the bucket's root")
	}
	if len(p)+1 > MaxNamespaceLen {
		return "", fmt.Errorf("prefix is %d bytes, at most %d allowed", len(p)+1, MaxNamespaceLen)
	}
	if err := validateSegment(p, true); err != nil {
		return "", fmt.Errorf("prefix: %v", err)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg+"/" == PrefixPayloads || seg+"/" == PrefixResults || seg+"/" == PrefixOutcomes {
			return "", fmt.Errorf("prefix %q has a segment %q, the name of claimcheck's own payload or result area: choose another", prefix, seg)
		}
	}
	return p + "/", nil
}

// namespaceFromURL takes prefix= out of u (each driver would otherwise see
// it) and returns it validated, or "" when u has none.
func namespaceFromURL(u *url.URL) (string, error) {
	q := u.Query()
	if !q.Has("prefix") {
		return "", nil
	}
	ns, err := ValidateNamespace(q.Get("prefix"))
	if err != nil {
		return "", err
	}
	q.Del("prefix")
	u.RawQuery = q.Encode()
	return ns, nil
}

// storeLocation is how messages name a store: scheme, bucket or directory,
// and namespace; never a query parameter (an endpoint may carry
// credentials) nor an object key.
func storeLocation(u *url.URL, ns string) string {
	loc := u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")
	return loc + "/" + ns
}

// Namespace is the store's prefix= (ending in '/'), or "" for the bucket's
// root. Keys in tickets are relative to it.
func (s *Store) Namespace() string { return s.namespace }

// Location names the store for messages: scheme, bucket (or directory) and
// namespace, as in s3://bucket/staging/; no credentials, no query. A store
// made by NewStore is "bucket" plus its namespace, if any.
func (s *Store) Location() string { return s.location }

// NamespaceOwner reads the namespace's ownership marker: nil, nil when
// there is none. Errors: ErrUnavailable, ErrAccessDenied, ErrConfig (see
// storeError) from the store; ErrConfig when the marker does not parse.
func (s *Store) NamespaceOwner(ctx context.Context) (*NamespaceOwner, error) {
	r, err := s.bucket.NewReader(ctx, NamespaceMarkerKey, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, startupError("claimcheck: read the namespace marker of "+s.location, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return nil, storeError("claimcheck: read the namespace marker of "+s.location, err, false)
	}
	var o NamespaceOwner
	if err := json.Unmarshal(b, &o); err != nil || o.DatabaseID == "" {
		return nil, fmt.Errorf("claimcheck: the namespace marker %s%s does not parse (not written by claimcheck?): %w", s.location, NamespaceMarkerKey, ErrConfig)
	}
	return &o, nil
}

// ClaimNamespace writes the ownership marker for owner unless the
// namespace has one, and returns the owner the marker records: owner, or
// the one already there (compare DatabaseID). The write is a conditional
// create, so two databases claiming a fresh namespace at once do not both
// win (on S3 and the memory store; the file store checks, then renames).
func (s *Store) ClaimNamespace(ctx context.Context, owner NamespaceOwner) (*NamespaceOwner, error) {
	if cur, err := s.NamespaceOwner(ctx); err != nil || cur != nil {
		return cur, err
	}
	if owner.Created.IsZero() {
		owner.Created = time.Now().UTC()
	}
	b, err := json.Marshal(owner)
	if err != nil {
		return nil, err
	}
	err = s.bucket.WriteAll(ctx, NamespaceMarkerKey, append(b, '\n'), &blob.WriterOptions{ContentType: "application/json", IfNotExist: true})
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return s.NamespaceOwner(ctx) // another database won the race
	}
	if err != nil {
		return nil, startupError("claimcheck: write the namespace marker of "+s.location, err)
	}
	return &owner, nil
}

package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// URLs
	_ "gocloud.dev/blob/memblob"  // mem:// URLs
	"gocloud.dev/gcerrors"
	"gocloud.dev/secrets"
)

// DefaultInlineThreshold is the largest payload, in bytes, carried inline in
// its ticket by default: 64 KiB, the usual break-even ("For jobs under
// roughly 64KB the round trip is not worth it"; docs/invariants.md).
const DefaultInlineThreshold = 64 << 10

// MaxInlineThreshold is the largest configurable inline threshold in bytes
// (4 MiB): its tickets still parse (MaxEncodedTicketBytes).
const MaxInlineThreshold = 4 << 20

// DefaultStoreName is the logical store name written into tickets when
// Options.Name is empty.
const DefaultStoreName = "default"

// Options configure a Store. The zero value is valid: content-addressed
// keys, 64 KiB inline threshold, no size limit, spooling in os.TempDir.
type Options struct {
	// MeterProvider and TracerProvider receive the store's metrics and
	// spans (docs/observability.md); nil: OpenTelemetry's global
	// providers, no-ops unless the program sets them.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// Name is the store's logical name, written into tickets in place of its
	// URL (which may carry credentials). Default DefaultStoreName.
	Name string
	// Secret is the deployment secret, at least 16 bytes. When set,
	// content-addressed keys are salted per tenant (HMAC-SHA256), so equal
	// content under two tenants lands on two objects and neither tenant can
	// probe for the other's; and SignTickets can be used.
	Secret []byte
	// SignTickets signs every ticket checked in (HMAC-SHA256 under a key
	// derived from Secret) and refuses, with ErrTicketForbidden, unsigned or
	// altered tickets at claim. Requires Secret.
	SignTickets bool
	// Keeper, when set, encrypts every payload at rest (envelope encryption:
	// a fresh streaming-AEAD data key per payload, wrapped by the keeper's
	// key). Check-in fails rather than store plaintext if the keeper cannot
	// wrap; claims refuse unencrypted objects. See seal.go.
	Keeper *secrets.Keeper
	// KeeperTimeout bounds each call to Keeper (wrapping or unwrapping one
	// data key): a keeper that does not answer within it fails the check-in
	// or claim with ErrKeeper, cause ErrTimeout. 0 means
	// DefaultKeeperTimeout (30 s).
	KeeperTimeout time.Duration
	// KeeperID is the id of Keeper's key-encryption key (KeeperID and
	// LocalKeyID compute it), recorded on every sealed object: check-ins
	// reuse only objects sealed under the same id, and errors name the id
	// a payload needs. Without it, reuse is decided by unwrapping the
	// existing object's data key (one keeper call).
	KeeperID string
	// Tenants, when set, are the only tenants whose tickets Claim accepts;
	// any other is ErrTicketForbidden, refused before any fetch.
	Tenants []string
	// InlineThreshold is the largest payload, in bytes, carried inline in the
	// ticket. 0 means DefaultInlineThreshold; negative means never inline.
	InlineThreshold int64
	// AlwaysOffload stores every payload, however small, as an object.
	AlwaysOffload bool
	// MaxPayloadSize, in bytes, rejects larger payloads with
	// ErrPayloadTooLarge, leaving nothing behind. 0 means no limit.
	MaxPayloadSize int64
	// MaxMessageSize is the transport's maximum message size in bytes (SQS:
	// 262,144 by default). When set, a threshold whose inline ticket could
	// exceed it is an ErrConfig at open. 0 skips the check.
	MaxMessageSize int64
	// NotFoundGrace is how long after a ticket's creation a claim that finds
	// no object is taken for an eventually consistent store still catching
	// up (Ceph RGW, older MinIO, Garage answer NoSuchKey for a moment after
	// another process's write): ErrNotVisibleYet, transient, retried with
	// backoff. After it, a missing object is ErrPayloadMissing (permanent).
	// 0 means DefaultNotFoundGrace, except for file:// and mem:// stores
	// OpenStore opens (none: a local read after a write is immediate);
	// negative means none. The store URL's
	// notfound_grace=D parameter sets it too (Options win). Measured from
	// the ticket's Created (the producer's clock) on the worker's clock.
	NotFoundGrace time.Duration
	// SpoolDir holds temporary files: check-ins being hashed (a payload
	// given as a regular file needs none) and claims being verified.
	// Default os.TempDir(). Files are removed when done.
	SpoolDir string
}

// Store checks payloads into a gocloud.dev/blob bucket and claims them back
// verified. It is safe for concurrent use.
type Store struct {
	tel       *instruments
	bucket    *blob.Bucket
	name      string
	keys      keyPolicy
	threshold int64 // -1: never inline
	maxSize   int64
	spoolDir  string
	fileRoot  string // set for file:// buckets: directories to fsync live under it
	// fileDirect: check-ins into the file:// store are written by
	// claimcheck itself, not fileblob's writer (filestore.go).
	fileDirect bool
	// syncHook, when set (tests only: export_test.go), is told each step
	// of a file:// commit (filestore.go).
	syncHook func(op, path string)
	owned    bool
	// heads: check-ins' buffers for a payload's first bytes (headBuffer).
	heads     sync.Pool
	signKey   []byte  // nil: tickets are not signed
	seal      *sealer // nil: payloads are stored as they are
	tenants   []string
	hostClock bool // file:// and mem://: this host's clock stamps the objects
	// notFoundGrace: a claim's NotFound this soon after the ticket's
	// creation is transient (ErrNotVisibleYet); 0 never.
	notFoundGrace time.Duration
	namespace     string     // prefix= of the URL, ending in '/'; "" for the root (namespace.go)
	location      string     // for messages: scheme://bucket/namespace
	hooks         StoreHooks // the bucket's StoreDriver's, or nil (driver.go)
}

// OpenStore opens the bucket at a gocloud.dev/blob URL (file://, mem://, and
// any other scheme whose driver the program imports) and wraps it. A scheme
// with a StoreDriver (s3:// from stores/s3store, gs:// from
// stores/gcsstore: import the package) is opened by that driver, with
// claimcheck's own URL parameters and upload settings (driver.go).
//
// For file:// URLs the directory is created if missing, temporary files are
// placed beside their final path (no_tmp_dir=1) so the final rename never
// crosses filesystems, and every check-in fsyncs the file and its directories
// before a ticket exists: gocloud's fileblob does not fsync on its own.
//
// Every scheme takes gocloud's prefix= parameter (for s3:// too): the
// store's namespace, under which every key it writes or reads lives (see
// namespace.go and ValidateNamespace).
//
// Errors: ErrConfig for a bad URL or option, ErrUnavailable or
// ErrAccessDenied when the bucket cannot be opened.
func OpenStore(ctx context.Context, rawURL string, opts *Options) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("claimcheck: store URL must look like file:///abs/dir, s3://bucket?region=...&endpoint=... or mem://: %w", ErrConfig)
	}
	ns, err := namespaceFromURL(u)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: store URL: %v: %w", err, ErrConfig)
	}
	location := storeLocation(u, ns)
	var fileRoot string
	var fileDirect bool
	if u.Scheme == "file" {
		// fileblob ignores a host (file://data/x opens /x), and reads "." as
		// a relative path that fileRoot below would not match.
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("claimcheck: file store URL takes no host, only an absolute path (file:///abs/dir): %w", ErrConfig)
		}
		fileRoot = filepath.FromSlash(u.Path)
		if fileRoot == "" || !filepath.IsAbs(fileRoot) {
			return nil, fmt.Errorf("claimcheck: file store URL needs an absolute path (file:///abs/dir): %w", ErrConfig)
		}
		if err := os.MkdirAll(fileRoot, 0o750); err != nil {
			return nil, fmt.Errorf("claimcheck: create store directory: %v: %w", pathErrNoName(err), ErrConfig)
		}
		q := u.Query()
		if q.Get("no_tmp_dir") == "" {
			q.Set("no_tmp_dir", "1")
		}
		u.RawQuery = q.Encode()
		// Written once, into a file without a name until it is
		// complete (filestore.go), where the file system allows it.
		fileDirect = fileDirectURL(q) && anonSupported(fileRoot)
	}
	grace, err := notFoundGraceFromURL(u) // notfound_grace (housekeeping.go)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: open store %s: %v: %w", u.Scheme, err, ErrConfig)
	}
	if grace != 0 && (opts == nil || opts.NotFoundGrace == 0) {
		o := Options{}
		if opts != nil {
			o = *opts
		}
		o.NotFoundGrace = grace
		opts = &o
	}
	var b *blob.Bucket
	var hooks StoreHooks
	if d := storeDriver(u.Scheme); d != nil { // driver.go
		b, hooks, err = d.OpenBucket(ctx, u)
	} else {
		b, err = blob.OpenBucket(ctx, u.String())
	}
	if err != nil {
		return nil, fmt.Errorf("claimcheck: open store %s: %v: %w", u.Scheme, err, ErrConfig)
	}
	if ns != "" {
		b = blob.PrefixedBucket(b, ns)
	}
	s, err := NewStore(b, opts)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	s.namespace, s.location = ns, location
	if hooks != nil {
		s.hooks = hooks
	}
	switch u.Scheme {
	case "file", "mem":
		s.hostClock = true // this host stamps the objects (Clock)
		if opts == nil || opts.NotFoundGrace == 0 {
			s.notFoundGrace = 0 // read after write is immediate here
		}
	}
	s.fileRoot, s.fileDirect = fileRoot, fileDirect
	s.owned = true
	return s, nil
}

// NewStore wraps an open bucket. Close does not close a bucket passed here.
// Durability is the bucket driver's: only OpenStore adds fsync for file://.
func NewStore(b *blob.Bucket, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	s := &Store{bucket: b, name: opts.Name, keys: keyPolicy{secret: opts.Secret}, maxSize: opts.MaxPayloadSize, spoolDir: opts.SpoolDir, location: "bucket",
		hooks: hooksFor(b), tel: newInstruments(opts.MeterProvider, opts.TracerProvider)}
	if s.name == "" {
		s.name = DefaultStoreName
	}
	if len(opts.Secret) > 0 && len(opts.Secret) < 16 {
		return nil, fmt.Errorf("claimcheck: the deployment secret must be at least 16 bytes: %w", ErrConfig)
	}
	if opts.SignTickets {
		if len(opts.Secret) == 0 {
			return nil, fmt.Errorf("claimcheck: signing tickets needs a deployment secret: %w", ErrConfig)
		}
		s.signKey = signingKey(opts.Secret)
	}
	if opts.Keeper != nil {
		if opts.KeeperTimeout < 0 {
			return nil, fmt.Errorf("claimcheck: negative keeper timeout %v: %w", opts.KeeperTimeout, ErrConfig)
		}
		s.seal = &sealer{keeper: opts.Keeper, timeout: opts.KeeperTimeout, keyID: opts.KeeperID, keys: newInlineKeys()}
	}
	for _, t := range opts.Tenants {
		if err := ValidateTenant(t); err != nil {
			return nil, fmt.Errorf("claimcheck: Options.Tenants: %v: %w", err, ErrConfig)
		}
	}
	s.tenants = slices.Clone(opts.Tenants)
	if err := validateStoreName(s.name); err != nil {
		return nil, fmt.Errorf("claimcheck: %v: %w", err, ErrConfig)
	}
	switch {
	case opts.AlwaysOffload || opts.InlineThreshold < 0:
		s.threshold = -1
	case opts.InlineThreshold == 0:
		s.threshold = DefaultInlineThreshold
	default:
		s.threshold = opts.InlineThreshold
	}
	if s.threshold > MaxInlineThreshold {
		return nil, fmt.Errorf("claimcheck: inline threshold of %d bytes is above the maximum of %d: %w", s.threshold, MaxInlineThreshold, ErrConfig)
	}
	if opts.MaxPayloadSize < 0 {
		return nil, fmt.Errorf("claimcheck: negative maximum payload size: %w", ErrConfig)
	}
	if opts.MaxMessageSize > 0 {
		if need := InlineTicketSize(s.threshold); need > opts.MaxMessageSize {
			return nil, fmt.Errorf("claimcheck: inline threshold of %d bytes makes tickets of up to %d bytes, above the transport's maximum message size of %d bytes: %w",
				s.threshold, need, opts.MaxMessageSize, ErrConfig)
		}
		if opts.MaxMessageSize < MaxTicketBytes {
			return nil, fmt.Errorf("claimcheck: transport's maximum message size of %d bytes is below the ticket budget of %d bytes: %w",
				opts.MaxMessageSize, MaxTicketBytes, ErrConfig)
		}
	}
	switch {
	case opts.NotFoundGrace == 0:
		s.notFoundGrace = DefaultNotFoundGrace
	case opts.NotFoundGrace > 0:
		s.notFoundGrace = opts.NotFoundGrace
	}
	if s.spoolDir == "" {
		s.spoolDir = os.TempDir()
	}
	if err := os.MkdirAll(s.spoolDir, 0o700); err != nil {
		return nil, fmt.Errorf("claimcheck: create spool directory: %v: %w", pathErrNoName(err), ErrConfig)
	}
	return s, nil
}

// InlineTicketSize is the largest encoded ticket, in bytes, for an inline
// payload of threshold bytes (base64 grows 3 bytes to 4), or MaxTicketBytes
// when threshold is negative (never inline). It allows for encryption: up
// to inlineSealOverhead bytes of ciphertext header and tags, and a wrapped
// data key of up to maxDEKField bytes.
func InlineTicketSize(threshold int64) int64 {
	if threshold < 0 {
		return MaxTicketBytes
	}
	return MaxTicketBytes + (threshold+inlineSealOverhead+2)/3*4 + int64(len(`,"inline":""`)) + maxDEKField
}

// Encryption overheads for InlineTicketSize, in bytes: Tink's streaming
// AEAD header (40 bytes) and one 16-byte tag per 1 MiB segment, rounded up;
// a wrapped keyset is about 200 bytes with a local key, more with a KMS.
const (
	inlineSealOverhead = 256
	maxDEKField        = 1024
)

// Name is the store's logical name, as written into tickets.
func (s *Store) Name() string { return s.name }

// Serves reports whether the store claims tickets of tenant: every tenant
// when Options.Tenants is empty, else only those listed. A worker uses it
// to leave another tenant's job for a worker that serves it, before it
// claims anything; Claim itself refuses such a ticket (ErrTicketForbidden).
func (s *Store) Serves(tenant string) bool {
	return len(s.tenants) == 0 || slices.Contains(s.tenants, tenant)
}

// Tenants are the only tenants the store claims tickets of
// (Options.Tenants), or nil when it serves every tenant.
func (s *Store) Tenants() []string { return slices.Clone(s.tenants) }

// InlineThreshold is the largest inline payload in bytes, or -1 when every
// payload is offloaded.
func (s *Store) InlineThreshold() int64 { return s.threshold }

// Bucket is the underlying bucket, for listing and operations tools.
func (s *Store) Bucket() *blob.Bucket { return s.bucket }

// Close closes the bucket if OpenStore opened it.
func (s *Store) Close() error {
	if s.owned {
		return s.bucket.Close()
	}
	return nil
}

// IsTempKey reports whether a listed key is a temporary file of an
// in-flight write (fileblob's "*.tmp" beside the final path), which
// listings and sweeps must skip.
func IsTempKey(key string) bool { return strings.HasSuffix(key, ".tmp") }

// syncDirs fsyncs dir and each parent up to the store root, so a rename into
// dir (and any directory MkdirAll created on the way) survives a crash.
func (s *Store) syncDirs(dir string) error {
	root := filepath.Clean(s.fileRoot)
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if err := syncPath(d); err != nil {
			return err
		}
		s.synced("fsync dir", d)
		if d == root || !strings.HasPrefix(d, root+string(filepath.Separator)) {
			return nil
		}
	}
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// pathErrNoName drops the path from an *os.PathError: paths under a store
// contain object keys, which error strings must not reveal.
func pathErrNoName(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// ObjectInfo is what the store records about the object behind a ticket.
type ObjectInfo struct {
	// Exists is false when the object is missing.
	Exists bool `json:"exists"`
	// Size in bytes, as the store reports it.
	Size int64 `json:"size"`
	// ContentType as stored.
	ContentType string `json:"content_type,omitempty"`
	// ModTime is when the object was last written.
	ModTime time.Time `json:"mod_time"`
	// SHA256Prefix is the digest recorded on the object at check-in (a
	// prefix, like every digest claimcheck prints).
	SHA256Prefix string `json:"sha256_prefix,omitempty"`
	// Encrypted is true when the object is sealed (its Size is then the
	// ciphertext's).
	Encrypted bool `json:"encrypted"`
	// KeyID is the id of the key-encryption key that sealed the object,
	// as recorded on it ("" when not encrypted, or sealed before ids were
	// recorded).
	KeyID string `json:"key_id,omitempty"`
	// MatchesTicket is true when the recorded digest and plaintext size
	// equal the ticket's. It is metadata, not a verification: only a claim reads and
	// hashes the bytes.
	MatchesTicket bool `json:"matches_ticket"`
}

// Stat reads the stored attributes of the object behind t without
// downloading it. An inline ticket has no object: Stat returns nil, nil.
// Errors: ErrTicketInvalid, ErrAccessDenied, ErrUnavailable; a missing
// object is not an error (Exists false).
func (s *Store) Stat(ctx context.Context, t *Ticket) (*ObjectInfo, error) {
	if _, err := s.Claim(t); err != nil {
		return nil, err
	}
	if t.IsInline() {
		return nil, nil
	}
	attrs, err := s.bucket.Attributes(ctx, t.Key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return &ObjectInfo{}, nil
	}
	if err != nil {
		return nil, storeError("claimcheck: stat "+t.String(), err, false)
	}
	sum := attrs.Metadata[metaSHA256]
	info := &ObjectInfo{Exists: true, Size: attrs.Size, ContentType: attrs.ContentType, ModTime: attrs.ModTime.UTC(),
		Encrypted:     attrs.Metadata[metaDEK] != "",
		KeyID:         attrs.Metadata[metaKEKID],
		MatchesTicket: sum == t.SHA256 && attrs.Metadata[metaSize] == strconv.FormatInt(t.Size, 10)}
	if !info.Encrypted && attrs.Size != t.Size {
		info.MatchesTicket = false
	}
	if len(sum) >= 12 {
		info.SHA256Prefix = sum[:12]
	}
	return info, nil
}

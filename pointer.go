package claimcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"gocloud.dev/blob"
)

// PointerSegment is the folder, under a tenant's payload prefix, of the
// per-message copies CopyForPointer writes:
//
//	payloads/<tenant>/pointer/<32 lowercase hex characters, random>
//
// Such an object belongs to the one message that names it (an AWS payload
// pointer handed to a foreign consumer), never to a ticket or a job: no
// claims-registry row refers to it, and the sweeper keeps it for its
// pointer retention (sweep.Options.PointerRetention) instead of the
// orphans' grace period.
const PointerSegment = "pointer"

// pointerIDLen is the length of a pointer object's random name in hex
// characters (128 bits).
const pointerIDLen = 32

// PointerKey reports whether key (relative to the store's namespace) names
// a per-message pointer copy: payloads/<tenant>/pointer/<32 hex>.
func PointerKey(key string) bool {
	rest, ok := strings.CutPrefix(key, PrefixPayloads)
	if !ok {
		return false
	}
	tenant, rest, ok := strings.Cut(rest, "/")
	if !ok || ValidateTenant(tenant) != nil {
		return false
	}
	id, ok := strings.CutPrefix(rest, PointerSegment+"/")
	if !ok || len(id) != pointerIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// CopyForPointer writes a copy of t's payload that only one message will
// name, and returns its key (relative to the store's namespace, as ticket
// keys are): payloads/<t.Tenant>/pointer/<random hex> (PointerSegment).
// A consumer that deletes the object it is pointed at once it has read it
// (the AWS extended clients' default on DeleteMessage) so deletes that copy
// and nothing a ticket, a job or another message needs: the
// content-addressed object is shared by every check-in of the same bytes
// (docs/invariants.md, invariant 2).
//
// An offloaded ticket's object is copied by the bucket (blob.Bucket.Copy:
// S3's CopyObject, server-side, up to S3's 5 GiB copy limit; the file
// store copies the file); an inline ticket's bytes are written. The copy's
// size is checked against t.Size.
//
// Errors: ErrConfig when the store seals its payloads (Options.Keeper: a
// foreign consumer would read ciphertext) or t belongs to another store;
// ErrTicketInvalid for an invalid ticket; ErrPayloadMissing when t's
// object does not exist; ErrPayloadCorrupt when the copy's size differs
// (the copy is deleted); ErrAccessDenied or ErrUnavailable for store
// failures. No error names the key.
func (s *Store) CopyForPointer(ctx context.Context, t *Ticket) (string, error) {
	if s.Seals() {
		return "", fmt.Errorf("claimcheck: copy for a pointer of %s: this store seals its payloads, and a foreign consumer would read ciphertext: %w", t, ErrConfig)
	}
	if err := t.validate(); err != nil {
		return "", fmt.Errorf("claimcheck: copy for a pointer: %w", err)
	}
	if t.DEK != "" {
		return "", fmt.Errorf("claimcheck: copy for a pointer of %s: the payload is sealed: %w", t, ErrConfig)
	}
	if !t.IsInline() && t.Store != s.name {
		return "", fmt.Errorf("claimcheck: copy for a pointer of %s: the ticket names store %q, this is %q: %w", t, t.Store, s.name, ErrConfig)
	}
	var id [pointerIDLen / 2]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("claimcheck: copy for a pointer: random name: %w", err)
	}
	key := PrefixPayloads + t.Tenant + "/" + PointerSegment + "/" + hex.EncodeToString(id[:])
	what := "claimcheck: copy for a pointer of " + t.String()
	if t.IsInline() {
		if err := s.bucket.WriteAll(ctx, key, t.Inline, &blob.WriterOptions{ContentType: t.ContentType}); err != nil {
			return "", storeError(what, err, false)
		}
	} else if err := s.bucket.Copy(ctx, key, t.Key, nil); err != nil {
		return "", storeError(what, err, true)
	}
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return "", storeError(what+": read the copy's attributes", err, false)
	}
	if a.Size != t.Size {
		_ = s.bucket.Delete(context.WithoutCancel(ctx), key)
		return "", fmt.Errorf("%s: the copy is %d bytes, the ticket says %d: %w", what, a.Size, t.Size, ErrPayloadCorrupt)
	}
	return key, nil
}

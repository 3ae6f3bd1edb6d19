package claimcheck

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"gocloud.dev/gcerrors"
)

// Adopt checks in, for tenant, an object that another tool wrote to this
// store's bucket under a key of its own (an AWS payload pointer's s3Key, for
// instance), so it can be claimed like any payload. The object is read once,
// as stored (no decryption), and must be exactly size bytes (size < 0: the
// size is not known, as with the npm package sns-sqs-big-payload's
// S3Payload pointers, and the object is taken as it is, within the store's
// MaxPayloadSize); it is then
// checked in as CheckIn does (content-addressed key, digest computed,
// encrypted if the store encrypts), and the new ticket returned. The
// foreign object is left as it is.
//
// Adoption cannot verify that the bytes are the ones the other tool meant:
// its format carries no digest. It checks the size, and from then on the
// digest of what was read protects the payload.
//
// Only objects outside claimcheck's own prefixes can be adopted: a key
// under PrefixPayloads or PrefixResults is refused with
// ErrTicketForbidden (else a pointer could read another tenant's payload),
// as is a tenant this store does not serve (Options.Tenants).
//
// Errors: ErrTicketInvalid for an empty key; ErrPayloadMissing when the
// object does not exist; ErrPayloadCorrupt when its size is not size (the
// copy already checked in, if any, is left for the sweeper); ErrAccessDenied
// or ErrUnavailable for store failures; CheckIn's errors otherwise.
func (s *Store) Adopt(ctx context.Context, tenant, key string, size int64, opts *CheckInOptions) (*Ticket, error) {
	if err := foreignKey("adopt for tenant "+strconv.Quote(tenant), key); err != nil {
		return nil, err
	}
	if len(s.tenants) > 0 && !slices.Contains(s.tenants, tenant) {
		return nil, fmt.Errorf("claimcheck: adopt for tenant %q: this worker does not serve the tenant: %w", tenant, ErrTicketForbidden)
	}
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, storeError("adopt: open foreign object", err, true)
	}
	defer r.Close()
	var body io.Reader = r
	if size >= 0 {
		// One byte more than expected, so a longer object is detected.
		body = io.LimitReader(r, size+1)
	}
	t, err := s.CheckIn(ctx, tenant, body, opts)
	if err != nil {
		return nil, err
	}
	if size >= 0 && t.Size != size {
		return nil, fmt.Errorf("claimcheck: adopt: foreign object of tenant %q is %s bytes, its pointer says %d: %w", tenant, sizeText(t.Size, size), size, ErrPayloadCorrupt)
	}
	return t, nil
}

// foreignKey refuses, for what, a key that is not a foreign object's:
// empty, or in claimcheck's own areas (payloads, results, outcome records,
// the namespace marker), which only tickets may claim and only the
// sweeper deletes.
func foreignKey(what, key string) error {
	if key == "" {
		return fmt.Errorf("claimcheck: %s: empty key: %w", what, ErrTicketInvalid)
	}
	for _, own := range []string{PrefixPayloads, PrefixResults, PrefixOutcomes} {
		if strings.HasPrefix(key, own) {
			return fmt.Errorf("claimcheck: %s: the key is in claimcheck's own %s… area, where only tickets may claim: %w", what, own, ErrTicketForbidden)
		}
	}
	if key == NamespaceMarkerKey {
		return fmt.Errorf("claimcheck: %s: the key is the namespace marker: %w", what, ErrTicketForbidden)
	}
	return nil
}

// DeleteAdopted deletes the foreign object at key (relative to the store's
// namespace) once its payload was adopted (Adopt) and processed: what the
// AWS extended clients' consumers do on acknowledgement by default, so an
// adopted payload is not kept twice. Deleting an object already gone is
// not an error (a redelivery deletes again).
//
// Errors: ErrTicketForbidden for a key in claimcheck's own areas (see
// Adopt), ErrTicketInvalid for an empty key; ErrAccessDenied or
// ErrUnavailable for store failures. No error names the key.
func (s *Store) DeleteAdopted(ctx context.Context, key string) error {
	if err := foreignKey("delete an adopted object", key); err != nil {
		return err
	}
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return storeError("delete an adopted object", err, false)
	}
	return nil
}

// sizeText shows a read size, "more than" when the read stopped at limit+1.
func sizeText(got, want int64) string {
	if got > want {
		return fmt.Sprintf("more than %d", want)
	}
	return fmt.Sprint(got)
}

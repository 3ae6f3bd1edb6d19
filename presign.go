package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ErrNoPresignedURL is returned (wrapped) by Store.PresignedURL for a
// payload the store cannot hand out through a presigned URL: an inline
// payload (no object), an encrypted one (the URL would serve ciphertext),
// or a store whose driver cannot presign (file://, mem://).
var ErrNoPresignedURL = errors.New("no presigned URL for this payload")

// MaxPresignTTL is the longest lifetime of a presigned URL: SigV4's limit.
const MaxPresignTTL = 7 * 24 * time.Hour

// PresignedURL returns a URL that GETs the object behind t straight from
// the store (an S3 presigned URL, SigV4 in its query) for ttl (1 s to
// MaxPresignTTL), made now and stored nowhere: never put it in a ticket or
// a message. Whoever holds it reads the object without any credential,
// and the store, not claimcheck, answers it: the bytes are not verified
// against the ticket on the way (hand out t's SHA-256 with it), and the
// URL shows the object's full key. The URL is valid only as long as the
// credentials that signed it (temporary credentials end it sooner).
//
// The ticket is checked as Claim checks it, and the object must exist and
// record t's digest and size (a HEAD; nothing is downloaded).
//
// Errors: ErrNoPresignedURL when the store encrypts payloads (the object
// holds ciphertext: serve it through claimcheck, which decrypts and
// verifies), t is inline, or the driver cannot presign; ErrConfig for a
// ttl out of range; ErrPayloadMissing; ErrPayloadCorrupt when the object
// records another digest; Claim's and the store's errors.
func (s *Store) PresignedURL(ctx context.Context, t *Ticket, ttl time.Duration) (string, error) {
	if ttl < time.Second || ttl > MaxPresignTTL {
		return "", fmt.Errorf("claimcheck: presign: lifetime %s is outside 1s to %s: %w", ttl, MaxPresignTTL, ErrConfig)
	}
	if _, err := s.Claim(t); err != nil {
		return "", err
	}
	switch {
	case t.IsInline():
		return "", fmt.Errorf("claimcheck: presign %s: the payload travels inline in its ticket, there is no object: %w", t, ErrNoPresignedURL)
	case s.seal != nil:
		return "", fmt.Errorf("claimcheck: presign %s: this store encrypts payloads, so a presigned URL would serve ciphertext: %w", t, ErrNoPresignedURL)
	}
	info, err := s.Stat(ctx, t)
	switch {
	case err != nil:
		return "", err
	case !info.Exists:
		return "", fmt.Errorf("claimcheck: presign %s: %w", t, ErrPayloadMissing)
	case info.Encrypted:
		return "", fmt.Errorf("claimcheck: presign %s: the object is encrypted, so a presigned URL would serve ciphertext: %w", t, ErrNoPresignedURL)
	case !info.MatchesTicket:
		return "", fmt.Errorf("claimcheck: presign %s: the object records another digest or size than the ticket: %w", t, ErrPayloadCorrupt)
	}
	u, err := s.bucket.SignedURL(ctx, t.Key, &blob.SignedURLOptions{Method: http.MethodGet, Expiry: ttl})
	if gcerrors.Code(err) == gcerrors.Unimplemented {
		return "", fmt.Errorf("claimcheck: presign %s: the store cannot presign URLs: %w", t, ErrNoPresignedURL)
	}
	if err != nil {
		return "", storeError("claimcheck: presign "+t.String(), err, false)
	}
	return u, nil
}

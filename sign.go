package claimcheck

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
)

// Authenticated tickets. Anyone who can write to the broker can write a
// ticket; a signature under a key derived from the deployment secret (which
// the broker operator does not hold) lets a worker refuse tickets it did not
// issue: a pointer at someone else's payload, or an altered digest. Tickets
// are refused before anything is fetched.

// signingKey derives the ticket-signing key from the deployment secret,
// separate from the key-salting keys (domain-separated HMAC).
func signingKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("claimcheck/ticket-sign/v1"))
	return m.Sum(nil)
}

// signature is base64url(HMAC-SHA256(key, the ticket encoded without Sig)).
func (t *Ticket) signature(key []byte) (string, error) {
	c := *t
	c.Sig = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("claimcheck: sign ticket: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// sign sets t.Sig when the store signs tickets.
func (s *Store) sign(t *Ticket) error {
	if s.signKey == nil {
		return nil
	}
	sig, err := t.signature(s.signKey)
	t.Sig = sig
	return err
}

// authorize refuses, with ErrTicketForbidden, a ticket for a tenant this
// store does not serve, or an unsigned or altered ticket when signing is on.
func (s *Store) authorize(t *Ticket) error {
	if len(s.tenants) > 0 && !slices.Contains(s.tenants, t.Tenant) {
		return fmt.Errorf("claimcheck: claim %s: this worker does not serve the tenant: %w", t, ErrTicketForbidden)
	}
	if s.signKey == nil {
		return nil
	}
	if t.Sig == "" {
		return fmt.Errorf("claimcheck: claim %s: unsigned ticket, and signing is required (a ticket enqueued before the deployment secret was set: replay it from a worker without --secret, or submit it again): %w", t, ErrTicketForbidden)
	}
	want, err := t.signature(s.signKey)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(want), []byte(t.Sig)) {
		return fmt.Errorf("claimcheck: claim %s: signature does not match (altered, or signed with another secret): %w", t, ErrTicketForbidden)
	}
	return nil
}

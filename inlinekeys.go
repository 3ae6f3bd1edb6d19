package claimcheck

import (
	"context"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/tink-crypto/tink-go/v2/tink"
)

// Inline data keys are reused within limits (docs/stores.md, "Inline data
// keys"), as the AWS Encryption SDK's data key caching reuses its data
// keys: a store seals a tenant's inline payloads under one data key for at
// most inlineKeyMaxAge and inlineKeyMaxUses payloads, and keeps the Tink
// primitive of each wrapped key it opened for inlineKeyMaxAge. Without
// it, each small job paid a keyset generation and a keeper wrap on check-in
// and a keeper unwrap, a keyset parse and aead.New on claim. Only Tink
// primitives are cached, never key bytes; each payload still has its own
// random 96-bit nonce (AES256-GCM), and the wrapped key stays bound to the
// tenant (associatedData), so a cached key never opens another tenant's
// payload.
const (
	// inlineKeyMaxAge bounds how long one inline data key seals, and how
	// long an opened one is kept: a key-encryption key revoked at the
	// keeper stops new check-ins and claims of the tenant within it.
	inlineKeyMaxAge = time.Minute
	// inlineKeyMaxUses bounds the payloads sealed under one inline data
	// key, far below AES-GCM's 2^32 random nonces per key (NIST SP
	// 800-38D, 8.3).
	inlineKeyMaxUses = 10_000
	// inlineKeyEntries bounds each cache: tenants sealing, wrapped keys
	// opened (least recently used evicted first).
	inlineKeyEntries = 1024
)

// inlineKeys caches inline data keys: seal by tenant, open by associated
// data and wrapped key. Safe for concurrent use.
type inlineKeys struct {
	now  func() time.Time // time.Now; tests move it
	seal *lru.Cache[string, *sealingKey]
	open *lru.Cache[string, openedKey]
}

// sealingKey is a tenant's current inline data key.
type sealingKey struct {
	aead    tink.AEAD
	wrapped string
	made    time.Time
	uses    atomic.Int64
}

// openedKey is the primitive of a wrapped inline data key opened before.
type openedKey struct {
	aead tink.AEAD
	made time.Time
}

func newInlineKeys() *inlineKeys {
	seal, _ := lru.New[string, *sealingKey](inlineKeyEntries) // errors only for a size ≤ 0
	open, _ := lru.New[string, openedKey](inlineKeyEntries)
	return &inlineKeys{now: time.Now, seal: seal, open: open}
}

// sealKey is the data key to seal an inline payload of tenant under (ad
// is associatedData(tenant, "")): the tenant's current one while it is
// younger than inlineKeyMaxAge and has sealed fewer than
// inlineKeyMaxUses payloads, else a fresh one (sealer.newInlineKey, whose
// errors it returns).
func (s sealer) sealKey(ctx context.Context, tenant string, ad []byte) (tink.AEAD, string, error) {
	if s.keys == nil {
		return s.newInlineKey(ctx, ad)
	}
	now := s.keys.now()
	if k, ok := s.keys.seal.Get(tenant); ok && now.Sub(k.made) < inlineKeyMaxAge && k.uses.Add(1) <= inlineKeyMaxUses {
		return k.aead, k.wrapped, nil
	}
	p, wrapped, err := s.newInlineKey(ctx, ad)
	if err != nil {
		return nil, "", err
	}
	k := &sealingKey{aead: p, wrapped: wrapped, made: now}
	k.uses.Store(1)
	s.keys.seal.Add(tenant, k)
	return p, wrapped, nil
}

// opened is the primitive of wrapped under ad if it was opened within
// inlineKeyMaxAge.
func (s sealer) opened(ad []byte, wrapped string) (tink.AEAD, bool) {
	if s.keys == nil {
		return nil, false
	}
	k, ok := s.keys.open.Get(string(ad) + "\x00" + wrapped)
	if !ok || s.keys.now().Sub(k.made) >= inlineKeyMaxAge {
		return nil, false
	}
	return k.aead, true
}

// keepOpened keeps the primitive of wrapped under ad (opened).
func (s sealer) keepOpened(ad []byte, wrapped string, p tink.AEAD) {
	if s.keys != nil {
		s.keys.open.Add(string(ad)+"\x00"+wrapped, openedKey{aead: p, made: s.keys.now()})
	}
}

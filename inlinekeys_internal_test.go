package claimcheck

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"gocloud.dev/secrets"
	"gocloud.dev/secrets/localsecrets"
)

// sealedStore is a mem:// store sealing under a fresh local key, with the
// inline key cache's clock at *now.
func sealedStore(t *testing.T, now *time.Time) (*Store, *secrets.Keeper) {
	t.Helper()
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	keeper := localsecrets.NewKeeper(key)
	t.Cleanup(func() { keeper.Close() })
	s, err := OpenStore(context.Background(), "mem://", &Options{Keeper: keeper})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.seal.keys.now = func() time.Time { return *now }
	return s, keeper
}

func claimInline(t *testing.T, s *Store, tk *Ticket) ([]byte, error) {
	t.Helper()
	p, err := s.Claim(tk)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	r, err := p.Open(context.Background())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// TestInlineDataKeyReuse: a tenant's inline payloads share a data key
// (each its own ciphertext) until the key is inlineKeyMaxAge old or has
// sealed inlineKeyMaxUses payloads; another tenant never shares it; and
// every ticket claims its own bytes, through the cache of opened keys and
// through a store that never opened the key.
func TestInlineDataKeyReuse(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s, keeper := sealedStore(t, &now)
	checkIn := func(tenant, body string) *Ticket {
		t.Helper()
		tk, err := s.CheckIn(ctx, tenant, strings.NewReader(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !tk.IsInline() || tk.DEK == "" {
			t.Fatalf("ticket inline %v, dek set %v; want an inline sealed ticket", tk.IsInline(), tk.DEK != "")
		}
		return tk
	}
	a1, a2 := checkIn("acme", "first"), checkIn("acme", "first")
	if a1.DEK != a2.DEK {
		t.Error("two inline payloads of one tenant within the limits have different data keys")
	}
	if bytes.Equal(a1.Inline, a2.Inline) {
		t.Error("the same bytes sealed twice under one data key gave one ciphertext (nonce reused)")
	}
	if b1 := checkIn("globex", "first"); b1.DEK == a1.DEK {
		t.Error("two tenants share an inline data key")
	}
	now = now.Add(inlineKeyMaxAge)
	a3 := checkIn("acme", "third")
	if a3.DEK == a1.DEK {
		t.Errorf("an inline data key sealed at %v old, limit %v", inlineKeyMaxAge, inlineKeyMaxAge)
	}
	k, _ := s.seal.keys.seal.Get("acme") // the key a3 made
	k.uses.Store(inlineKeyMaxUses)
	if a4 := checkIn("acme", "fourth"); a4.DEK == a3.DEK {
		t.Errorf("an inline data key sealed more than %d payloads", inlineKeyMaxUses)
	}

	// Claims: through the cache (a1 opened twice), and on a worker's store
	// (same keeper, empty caches).
	for _, tk := range []*Ticket{a1, a2, a1, a3} {
		if got, err := claimInline(t, s, tk); err != nil || string(got) != map[*Ticket]string{a1: "first", a2: "first", a3: "third"}[tk] {
			t.Fatalf("claim: %q, %v", got, err)
		}
	}
	worker, err := OpenStore(ctx, "mem://", &Options{Keeper: keeper}) // inline tickets need no bucket
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	if got, err := claimInline(t, worker, a2); err != nil || string(got) != "first" {
		t.Fatalf("claim on a worker's store: %q, %v", got, err)
	}
}

// TestInlineOpenedKeyStaysBound: a data key opened (and cached) for one
// tenant does not open a ticket of another tenant carrying it, and a
// tampered ciphertext under a cached key is still corrupt.
func TestInlineOpenedKeyStaysBound(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s, _ := sealedStore(t, &now)
	tk, err := s.CheckIn(context.Background(), "acme", strings.NewReader("acme's bytes"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := claimInline(t, s, tk); err != nil { // opened: now cached
		t.Fatal(err)
	}
	moved := *tk
	moved.Tenant = "globex"
	if got, err := claimInline(t, s, &moved); !errors.Is(err, ErrPayloadCorrupt) {
		t.Errorf("acme's ticket under tenant globex: %q, %v; want ErrPayloadCorrupt", got, err)
	}
	tampered := *tk
	tampered.Inline = bytes.Clone(tk.Inline)
	tampered.Inline[len(tampered.Inline)-1] ^= 1
	if got, err := claimInline(t, s, &tampered); !errors.Is(err, ErrPayloadCorrupt) {
		t.Errorf("tampered ciphertext under a cached key: %q, %v; want ErrPayloadCorrupt", got, err)
	}
	now = now.Add(inlineKeyMaxAge) // expired: unwrapped again
	if got, err := claimInline(t, s, tk); err != nil || string(got) != "acme's bytes" {
		t.Errorf("claim after the cached key expired: %q, %v", got, err)
	}
}

// TestInlineDataKeyAfterKeeperRefuses: once the keeper refuses (here:
// closed), a tenant's inline data key made before still seals and its
// opened key still opens until they are inlineKeyMaxAge old; then
// check-ins and claims fail with ErrKeeper, transient, and a tenant
// without a key fails at once.
func TestInlineDataKeyAfterKeeperRefuses(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s, keeper := sealedStore(t, &now)
	tk, err := s.CheckIn(ctx, "acme", strings.NewReader("before"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := claimInline(t, s, tk); err != nil {
		t.Fatal(err)
	}
	keeper.Close()
	if _, err := s.CheckIn(ctx, "acme", strings.NewReader("within the minute"), nil); err != nil {
		t.Errorf("check-in under the cached key after the keeper refused: %v", err)
	}
	if got, err := claimInline(t, s, tk); err != nil || string(got) != "before" {
		t.Errorf("claim through the opened key after the keeper refused: %q, %v", got, err)
	}
	if _, err := s.CheckIn(ctx, "globex", strings.NewReader("new tenant"), nil); !errors.Is(err, ErrKeeper) || IsPermanent(err) {
		t.Errorf("check-in of a tenant without a key, keeper refusing: %v; want transient ErrKeeper", err)
	}
	now = now.Add(inlineKeyMaxAge)
	if _, err := s.CheckIn(ctx, "acme", strings.NewReader("after the minute"), nil); !errors.Is(err, ErrKeeper) || IsPermanent(err) {
		t.Errorf("check-in a minute later, keeper refusing: %v; want transient ErrKeeper", err)
	}
	if got, err := claimInline(t, s, tk); !errors.Is(err, ErrKeeper) || IsPermanent(err) {
		t.Errorf("claim a minute later, keeper refusing: %q, %v; want transient ErrKeeper", got, err)
	}
}

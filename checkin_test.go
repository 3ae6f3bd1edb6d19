package claimcheck_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
)

const threshold = claimcheck.DefaultInlineThreshold

var contentKeyRE = regexp.MustCompile(`^payloads/([a-z0-9][a-z0-9_-]*)/([0-9a-f]{2})/([0-9a-f]{64})(\.k[0-9a-f]{8})?$`)

// assertContentKey checks key is payloads/<tenant>/<xx>/<digest> with xx the
// digest's first two characters, and returns the digest.
func assertContentKey(t *testing.T, key, tenant string) string {
	t.Helper()
	m := contentKeyRE.FindStringSubmatch(key)
	if m == nil || m[1] != tenant || m[2] != m[3][:2] {
		t.Fatalf("key %q is not payloads/%s/<xx>/<digest>", key, tenant)
	}
	return m[3]
}

func TestCheckInSizes(t *testing.T) {
	t.Parallel()

	for _, backend := range []string{"file", "mem"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name   string
				size   int
				inline bool
			}{
				{"Empty", 0, true},
				{"One", 1, true},
				{"ThresholdMinus1", threshold - 1, true},
				{"Threshold", threshold, true},
				{"ThresholdPlus1", threshold + 1, false},
				{"3MiB", 3<<20 + 7, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					var b *testBundle
					if backend == "file" {
						b = setup(t, nil)
					} else {
						b = setupMem(t, nil)
					}
					data := randomBytes(tc.size, uint64(tc.size))
					var progress []int64
					tk := b.checkIn(t, "acme", data, &claimcheck.CheckInOptions{
						ContentType: "application/octet-stream",
						Progress:    func(n int64) { progress = append(progress, n) },
					})
					if tk.Size != int64(tc.size) || tk.SHA256 != sha256Hex(data) || tk.Tenant != "acme" ||
						tk.Version != 1 || tk.ContentType != "application/octet-stream" {
						t.Fatalf("ticket = %v (type %q), want size %d sha256 %s", tk, tk.ContentType, tc.size, sha256Hex(data))
					}
					if age := time.Since(tk.Created); age < 0 || age > time.Minute || tk.Created.Location() != time.UTC {
						t.Fatalf("Created = %v", tk.Created)
					}
					if tk.IsInline() != tc.inline {
						t.Fatalf("IsInline = %v, want %v", tk.IsInline(), tc.inline)
					}
					if tc.size > 0 && (len(progress) == 0 || progress[len(progress)-1] != int64(tc.size)) {
						t.Fatalf("progress ended at %v, want %d", progress[max(0, len(progress)-1):], tc.size)
					}
					for i := 1; i < len(progress); i++ {
						if progress[i] <= progress[i-1] {
							t.Fatalf("progress not increasing: %v", progress)
						}
					}
					if tc.inline {
						if tk.Store != "" || tk.Key != "" || !bytes.Equal(tk.Inline, data) {
							t.Fatalf("inline ticket: store %q key %q, %d inline bytes", tk.Store, tk.Key, len(tk.Inline))
						}
						b.assertObjects(t) // an inline payload touches no object
					} else {
						if tk.Store != "default" || tk.Inline != nil {
							t.Fatalf("offloaded ticket: store %q, %d inline bytes", tk.Store, len(tk.Inline))
						}
						if d := assertContentKey(t, tk.Key, "acme"); d != tk.SHA256 {
							t.Fatalf("key digest %s, want the payload's sha256 %s", d, tk.SHA256)
						}
						b.assertObjects(t, tk.Key)
						wire := mustMarshal(t, tk)
						if len(wire) > claimcheck.MaxTicketBytes {
							t.Fatalf("ticket is %d bytes", len(wire))
						}
					}
					if got := b.claimBytes(t, tk); !bytes.Equal(got, data) {
						t.Fatalf("claimed %d bytes (sha256 %s), want %d (%s)", len(got), sha256Hex(got), len(data), tk.SHA256)
					}
					b.assertSpoolEmpty(t)
				})
			}
		})
	}
}

// TestCheckInThresholdCountsBytes uses three-byte UTF-8 characters: the
// threshold is in bytes, so 21,846 "€" (65,538 bytes) are offloaded although
// they are far fewer than 65,536 characters.
func TestCheckInThresholdCountsBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)

	atThreshold := strings.Repeat("€", threshold/3) + "a" // 65,535 + 1 bytes
	if len(atThreshold) != threshold {
		t.Fatalf("test text is %d bytes", len(atThreshold))
	}
	tk := b.checkIn(t, "acme", []byte(atThreshold), &claimcheck.CheckInOptions{ContentType: "text/plain; charset=utf-8"})
	if !tk.IsInline() || tk.Size != threshold {
		t.Fatalf("%d-byte text: inline=%v size=%d, want inline, %d", len(atThreshold), tk.IsInline(), tk.Size, threshold)
	}

	over := strings.Repeat("€", threshold/3+1) // 21,846 characters, 65,538 bytes
	if n := len([]rune(over)); n >= threshold/2 {
		t.Fatalf("test text has %d characters", n)
	}
	tk = b.checkIn(t, "acme", []byte(over), &claimcheck.CheckInOptions{ContentType: "text/plain; charset=utf-8"})
	if tk.IsInline() || tk.Size != int64(len(over)) || tk.Size != threshold+2 {
		t.Fatalf("%d characters in %d bytes: inline=%v size=%d, want offloaded, %d", len([]rune(over)), len(over), tk.IsInline(), tk.Size, len(over))
	}
	if got := b.claimBytes(t, tk); string(got) != over {
		t.Fatal("claimed text differs")
	}
}

func TestCheckInInlineThresholdOption(t *testing.T) {
	t.Parallel()

	t.Run("Custom", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &claimcheck.Options{InlineThreshold: 100})
		if got := b.store.InlineThreshold(); got != 100 {
			t.Fatalf("InlineThreshold() = %d", got)
		}
		if tk := b.checkIn(t, "acme", randomBytes(100, 1), nil); !tk.IsInline() {
			t.Fatal("100 bytes not inline at threshold 100")
		}
		if tk := b.checkIn(t, "acme", randomBytes(101, 1), nil); tk.IsInline() {
			t.Fatal("101 bytes inline at threshold 100")
		}
	})

	for name, opts := range map[string]*claimcheck.Options{
		"AlwaysOffload":     {AlwaysOffload: true},
		"NegativeThreshold": {InlineThreshold: -1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, opts)
			if got := b.store.InlineThreshold(); got != -1 {
				t.Fatalf("InlineThreshold() = %d, want -1", got)
			}
			var keys []string
			for _, size := range []int{0, 1, 100, threshold} {
				data := randomBytes(size, uint64(size))
				tk := b.checkIn(t, "acme", data, nil)
				if tk.IsInline() || tk.Inline != nil {
					t.Fatalf("%d bytes travelled inline", size)
				}
				if d := assertContentKey(t, tk.Key, "acme"); d != sha256Hex(data) {
					t.Fatalf("key digest %s, want %s", d, sha256Hex(data))
				}
				if got := b.claimBytes(t, tk); !bytes.Equal(got, data) {
					t.Fatalf("claimed %d bytes, want %d", len(got), size)
				}
				keys = append(keys, tk.Key)
			}
			b.assertObjects(t, keys...)
		})
	}

	t.Run("DefaultName", func(t *testing.T) {
		t.Parallel()
		b := setupMem(t, &claimcheck.Options{Name: "archive", AlwaysOffload: true})
		if tk := b.checkIn(t, "acme", []byte("x"), nil); tk.Store != "archive" {
			t.Fatalf("Store = %q, want archive", tk.Store)
		}
		if got := setupMem(t, nil).store.Name(); got != claimcheck.DefaultStoreName {
			t.Fatalf("Name() = %q", got)
		}
	})
}

// TestCheckInIdempotent checks a retried check-in writes nothing new.
func TestCheckInIdempotent(t *testing.T) {
	t.Parallel()

	for _, backend := range []string{"file", "mem"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var b *testBundle
			if backend == "file" {
				b = setup(t, nil)
			} else {
				b = setupMem(t, nil)
			}
			data := randomBytes(200_000, 42)
			first := b.checkIn(t, "acme", data, &claimcheck.CheckInOptions{ContentType: "application/pdf"})
			attrs, err := b.store.Bucket().Attributes(b.ctx, first.Key)
			if err != nil {
				t.Fatal(err)
			}
			var before []string
			if b.root != "" {
				before = b.files(t)
			}
			time.Sleep(20 * time.Millisecond) // a rewrite would move ModTime

			for range 3 {
				again := b.checkIn(t, "acme", data, &claimcheck.CheckInOptions{ContentType: "application/pdf"})
				if again.Key != first.Key || again.SHA256 != first.SHA256 || again.Size != first.Size || again.Store != first.Store {
					t.Fatalf("re-check-in ticket %+v differs from %+v", again, first)
				}
			}
			b.assertObjects(t, first.Key)
			attrs2, err := b.store.Bucket().Attributes(b.ctx, first.Key)
			if err != nil {
				t.Fatal(err)
			}
			if b.root == "" && (!attrs2.ModTime.Equal(attrs.ModTime) || attrs2.ETag != attrs.ETag) {
				t.Fatalf("object rewritten: ModTime %v -> %v, ETag %s -> %s", attrs.ModTime, attrs2.ModTime, attrs.ETag, attrs2.ETag)
			}
			if b.root != "" {
				// The file store refreshes a reused object's age (so expiry
				// counts from the newest job) without rewriting it: same
				// file, same bytes, later ModTime.
				if !attrs2.ModTime.After(attrs.ModTime) {
					t.Fatalf("reused object's ModTime %v not refreshed after %v", attrs2.ModTime, attrs.ModTime)
				}
				path := filepath.Join(b.root, filepath.FromSlash(first.Key))
				if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("reused object's bytes changed: %v", err)
				}
				if after := b.files(t); strings.Join(after, ",") != strings.Join(before, ",") {
					t.Fatalf("files changed: %q -> %q", before, after)
				}
				b.assertNoTempFiles(t)
			}
		})
	}
}

// TestCheckInConcurrentSameBytes races check-ins of the same payload: all
// succeed, on one key, and leave one object. On mem:// the conditional
// create is atomic, so losers take the "already there, same bytes" path.
func TestCheckInConcurrentSameBytes(t *testing.T) {
	t.Parallel()

	for _, backend := range []string{"file", "mem"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var b *testBundle
			if backend == "file" {
				b = setup(t, nil)
			} else {
				b = setupMem(t, nil)
			}
			data := randomBytes(1<<20, 7)

			const n = 8
			var wg sync.WaitGroup
			tickets := make([]*claimcheck.Ticket, n)
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					tickets[i], errs[i] = b.store.CheckIn(b.ctx, "acme", bytes.NewReader(data), nil)
				})
			}
			wg.Wait()
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("check-in %d: %v", i, errs[i])
				}
				if tickets[i].Key != tickets[0].Key {
					t.Fatalf("check-in %d key %s, want %s", i, tickets[i].Key, tickets[0].Key)
				}
			}
			b.assertObjects(t, tickets[0].Key)
			if b.root != "" {
				b.assertNoTempFiles(t)
			}
			if got := b.claimBytes(t, tickets[0]); !bytes.Equal(got, data) {
				t.Fatal("claimed bytes differ")
			}
		})
	}
}

// TestCheckInNamedConcurrentConflict races check-ins of different bytes
// under one name: exactly one wins, every other one fails with
// ErrKeyConflict, and the object holds the winner's bytes. A second
// "winner" would hold a ticket whose object has other bytes: a job lost as
// payload-corrupt.
func TestCheckInNamedConcurrentConflict(t *testing.T) {
	t.Parallel()

	for _, backend := range []string{"file", "mem"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			for iter := range 20 { // the race is narrow: give it chances
				var b *testBundle
				if backend == "file" {
					b = setup(t, nil)
				} else {
					b = setupMem(t, nil)
				}
				const n = 8
				data := make([][]byte, n)
				for i := range n {
					data[i] = randomBytes(200_000, uint64(iter*n+i))
				}
				tickets := make([]*claimcheck.Ticket, n)
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						tickets[i], errs[i] = b.store.CheckIn(b.ctx, "acme", bytes.NewReader(data[i]), &claimcheck.CheckInOptions{Name: "po-1234"})
					})
				}
				wg.Wait()
				winner := -1
				for i := range n {
					switch {
					case errs[i] == nil && winner >= 0:
						t.Fatalf("iteration %d: check-ins %d and %d of different bytes both succeeded on %s", iter, winner, i, tickets[i].Key)
					case errs[i] == nil:
						winner = i
					case !errors.Is(errs[i], claimcheck.ErrKeyConflict):
						t.Fatalf("iteration %d: check-in %d: %v, want ErrKeyConflict", iter, i, errs[i])
					}
				}
				if winner < 0 {
					t.Fatalf("iteration %d: no check-in succeeded", iter)
				}
				b.assertObjects(t, "payloads/acme/named/po-1234")
				if got := b.claimBytes(t, tickets[winner]); !bytes.Equal(got, data[winner]) {
					t.Fatalf("iteration %d: object does not hold the winner's bytes", iter)
				}
			}
		})
	}
}

func TestCheckInSaltedKeys(t *testing.T) {
	t.Parallel()
	secret := []byte("deployment-secret-for-tests")
	b := setup(t, &claimcheck.Options{Secret: secret})
	data := randomBytes(100_000, 9)
	plain := sha256Hex(data)

	alpha := b.checkIn(t, "alpha", data, nil)
	beta := b.checkIn(t, "beta", data, nil)
	da := assertContentKey(t, alpha.Key, "alpha")
	db := assertContentKey(t, beta.Key, "beta")
	if da == db {
		t.Fatalf("same bytes under two tenants share the key digest %s", da)
	}
	if da == plain || db == plain {
		t.Fatalf("salted key digest equals the plain sha256 %s", plain)
	}
	if alpha.SHA256 != plain || beta.SHA256 != plain {
		t.Fatalf("tickets carry sha256 %s and %s, want the payload's %s", alpha.SHA256, beta.SHA256, plain)
	}

	// The documented derivation: HMAC(HMAC(secret, label||tenant), content).
	for _, tc := range []struct{ tenant, digest string }{{"alpha", da}, {"beta", db}} {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("claimcheck/tenant-key/v1\x00" + tc.tenant))
		k := hmac.New(sha256.New, m.Sum(nil))
		k.Write(data)
		if want := hex.EncodeToString(k.Sum(nil)); tc.digest != want {
			t.Errorf("tenant %s key digest %s, want %s", tc.tenant, tc.digest, want)
		}
	}

	// Deterministic: a retry under the same tenant lands on the same key.
	if again := b.checkIn(t, "alpha", data, nil); again.Key != alpha.Key {
		t.Fatalf("retry key %s, want %s", again.Key, alpha.Key)
	}
	b.assertObjects(t, alpha.Key, beta.Key)

	// Another deployment secret gives another key.
	other := setupMem(t, &claimcheck.Options{Secret: []byte("another-deployment-secret")})
	if tk := other.checkIn(t, "alpha", data, nil); tk.Key == alpha.Key {
		t.Fatal("two secrets give the same key")
	}

	// Without a secret, the same bytes under two tenants share the digest.
	unsalted := setupMem(t, nil)
	ka := assertContentKey(t, unsalted.checkIn(t, "alpha", data, nil).Key, "alpha")
	kb := assertContentKey(t, unsalted.checkIn(t, "beta", data, nil).Key, "beta")
	if ka != plain || kb != plain {
		t.Fatalf("unsalted key digests %s, %s, want %s", ka, kb, plain)
	}

	for _, tk := range []*claimcheck.Ticket{alpha, beta} {
		if got := b.claimBytes(t, tk); !bytes.Equal(got, data) {
			t.Fatalf("claim %s: bytes differ", tk.Tenant)
		}
	}
}

func TestCheckInNamedKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	v1 := randomBytes(threshold+10, 1)
	v2 := randomBytes(threshold+20, 2)

	tk := b.checkIn(t, "acme", v1, &claimcheck.CheckInOptions{Name: "orders/2026/po-1234.pdf"})
	if want := "payloads/acme/named/orders/2026/po-1234.pdf"; tk.Key != want {
		t.Fatalf("key = %q, want %q", tk.Key, want)
	}
	// Same bytes again: no-op, same key.
	if again := b.checkIn(t, "acme", v1, &claimcheck.CheckInOptions{Name: "orders/2026/po-1234.pdf"}); again.Key != tk.Key {
		t.Fatalf("re-check-in key %q", again.Key)
	}

	// Different bytes under the same name: conflict, nothing overwritten.
	_, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(v2), &claimcheck.CheckInOptions{Name: "orders/2026/po-1234.pdf"})
	assertIs(t, err, claimcheck.ErrKeyConflict)
	if !claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonKeyConflict {
		t.Fatalf("conflict: IsPermanent=%v Reason=%q", claimcheck.IsPermanent(err), claimcheck.Reason(err))
	}
	if strings.Contains(err.Error(), tk.Key) {
		t.Fatalf("error names the key: %v", err)
	}
	if got := b.claimBytes(t, tk); !bytes.Equal(got, v1) {
		t.Fatal("named object was overwritten")
	}

	// A version is a new key.
	tv2 := b.checkIn(t, "acme", v2, &claimcheck.CheckInOptions{Name: "orders/2026/po-1234.pdf", Version: "v2"})
	if want := "payloads/acme/named/orders/2026/po-1234.pdf@v2"; tv2.Key != want {
		t.Fatalf("versioned key = %q, want %q", tv2.Key, want)
	}
	_, err = b.store.CheckIn(b.ctx, "acme", bytes.NewReader(v1), &claimcheck.CheckInOptions{Name: "orders/2026/po-1234.pdf", Version: "v2"})
	assertIs(t, err, claimcheck.ErrKeyConflict)

	// Results get their own prefix.
	res := b.checkIn(t, "acme", v2, &claimcheck.CheckInOptions{Name: "orders/2026/po-1234.pdf", Result: true})
	if want := "results/acme/named/orders/2026/po-1234.pdf"; res.Key != want {
		t.Fatalf("result key = %q, want %q", res.Key, want)
	}

	// Longest name and version allowed.
	long := b.checkIn(t, "acme", v1, &claimcheck.CheckInOptions{
		Name:    strings.Repeat("n", claimcheck.MaxNameLen),
		Version: strings.Repeat("v", claimcheck.MaxVersionLen),
	})
	b.assertObjects(t, tk.Key, tv2.Key, res.Key, long.Key)
	for _, c := range []struct {
		tk   *claimcheck.Ticket
		data []byte
	}{{tk, v1}, {tv2, v2}, {res, v2}, {long, v1}} {
		if got := b.claimBytes(t, c.tk); !bytes.Equal(got, c.data) {
			t.Fatalf("claim %s: bytes differ", c.tk.Key)
		}
		if n := len(mustMarshal(t, c.tk)); n > claimcheck.MaxTicketBytes {
			t.Fatalf("ticket for %s is %d bytes", c.tk.Key, n)
		}
	}
	b.assertNoTempFiles(t)
}

// countingSource counts bytes read from it.
type countingSource struct {
	r io.Reader
	n int
}

func (c *countingSource) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestCheckInInvalidInput(t *testing.T) {
	t.Parallel()

	for name, tc := range map[string]struct {
		tenant string
		opts   claimcheck.CheckInOptions
	}{
		"EmptyTenant":       {"", claimcheck.CheckInOptions{}},
		"UppercaseTenant":   {"Acme", claimcheck.CheckInOptions{}},
		"TenantLeadingDash": {"-acme", claimcheck.CheckInOptions{}},
		"TenantSlash":       {"acme/../beta", claimcheck.CheckInOptions{}},
		"TenantSpace":       {"ac me", claimcheck.CheckInOptions{}},
		"TenantTooLong":     {strings.Repeat("a", claimcheck.MaxTenantLen+1), claimcheck.CheckInOptions{}},
		"NameTraversal":     {"acme", claimcheck.CheckInOptions{Name: "../beta/x"}},
		"NameDot":           {"acme", claimcheck.CheckInOptions{Name: "a/./b"}},
		"NameDoubleSlash":   {"acme", claimcheck.CheckInOptions{Name: "a//b"}},
		"NameTrailingSlash": {"acme", claimcheck.CheckInOptions{Name: "a/"}},
		"NameLeadingSlash":  {"acme", claimcheck.CheckInOptions{Name: "/a"}},
		"NameSpace":         {"acme", claimcheck.CheckInOptions{Name: "a b"}},
		"NameAt":            {"acme", claimcheck.CheckInOptions{Name: "a@b"}},
		"NameNonASCII":      {"acme", claimcheck.CheckInOptions{Name: "façade"}},
		"NameTooLong":       {"acme", claimcheck.CheckInOptions{Name: strings.Repeat("n", claimcheck.MaxNameLen+1)}},
		"VersionSlash":      {"acme", claimcheck.CheckInOptions{Name: "a", Version: "v/2"}},
		"VersionDotDot":     {"acme", claimcheck.CheckInOptions{Name: "a", Version: ".."}},
		"VersionTooLong":    {"acme", claimcheck.CheckInOptions{Name: "a", Version: strings.Repeat("v", claimcheck.MaxVersionLen+1)}},
		"VersionNoName":     {"acme", claimcheck.CheckInOptions{Version: "v2"}},
		"TypeNotAType":      {"acme", claimcheck.CheckInOptions{ContentType: "not a type"}},
		"TypeHTMLChars":     {"acme", claimcheck.CheckInOptions{ContentType: `text/html; x="<b>"`}},
		"TypeNewline":       {"acme", claimcheck.CheckInOptions{ContentType: "text/plain\n"}},
		"TypeNonASCII":      {"acme", claimcheck.CheckInOptions{ContentType: "text/plé"}},
		"TypeTooLong":       {"acme", claimcheck.CheckInOptions{ContentType: "application/" + strings.Repeat("x", claimcheck.MaxContentTypeLen-11)}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			for _, size := range []int{10, threshold + 1} {
				src := &countingSource{r: bytes.NewReader(randomBytes(size, 3))}
				tk, err := b.store.CheckIn(b.ctx, tc.tenant, src, &tc.opts)
				if tk != nil {
					t.Fatalf("CheckIn returned a ticket: %+v", tk)
				}
				assertIs(t, err, claimcheck.ErrTicketInvalid)
				if src.n != 0 {
					t.Fatalf("invalid check-in read %d bytes of the payload", src.n)
				}
			}
			b.assertObjects(t)
			if f := b.files(t); len(f) != 0 {
				t.Fatalf("files in bucket: %q", f)
			}
			b.assertSpoolEmpty(t)
		})
	}
}

func TestCheckInMaxPayloadSize(t *testing.T) {
	t.Parallel()

	const limit = 3*threshold + 5
	for _, tc := range []struct {
		name string
		size int
		ok   bool
	}{
		{"Small", 100, true},
		{"AtLimit", limit, true},
		{"OverLimit", limit + 1, false},
		{"FarOver", 2 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &claimcheck.Options{MaxPayloadSize: limit})
			data := randomBytes(tc.size, 5)
			tk, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(data), nil)
			if tc.ok {
				if err != nil {
					t.Fatalf("CheckIn(%d bytes, limit %d): %v", tc.size, limit, err)
				}
				if got := b.claimBytes(t, tk); !bytes.Equal(got, data) {
					t.Fatal("bytes differ")
				}
				return
			}
			if tk != nil {
				t.Fatalf("CheckIn returned a ticket: %v", tk)
			}
			assertIs(t, err, claimcheck.ErrPayloadTooLarge)
			if !claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonPayloadTooLarge {
				t.Fatalf("IsPermanent=%v Reason=%q", claimcheck.IsPermanent(err), claimcheck.Reason(err))
			}
			b.assertObjects(t)
			if f := b.files(t); len(f) != 0 {
				t.Fatalf("files in bucket: %q", f)
			}
			b.assertSpoolEmpty(t)
		})
	}

	t.Run("BelowInlineThreshold", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &claimcheck.Options{MaxPayloadSize: 10})
		if _, err := b.store.CheckIn(b.ctx, "acme", strings.NewReader("0123456789"), nil); err != nil {
			t.Fatalf("10 bytes at limit 10: %v", err)
		}
		_, err := b.store.CheckIn(b.ctx, "acme", strings.NewReader("0123456789A"), nil)
		assertIs(t, err, claimcheck.ErrPayloadTooLarge)
		b.assertObjects(t)
	})

	t.Run("AlwaysOffload", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &claimcheck.Options{MaxPayloadSize: 10, AlwaysOffload: true})
		_, err := b.store.CheckIn(b.ctx, "acme", strings.NewReader("0123456789A"), nil)
		assertIs(t, err, claimcheck.ErrPayloadTooLarge)
		b.assertObjects(t)
		b.assertSpoolEmpty(t)
	})
}

// failingReader returns n bytes of data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

var errReader = errors.New("disk on fire")

// posture is a store configuration a test runs under: unencrypted (nil
// options), or encrypted under a fresh keeper.
type posture struct {
	name string // the subtest's: name, or name+"Encrypted"
	opts *claimcheck.Options
}

func postures(t *testing.T, name string) []posture {
	return []posture{{name, nil}, {name + "Encrypted", &claimcheck.Options{Keeper: newKeeper(t)}}}
}

// assertNothingLeft fails if a failed check-in into b's file:// store left
// an object, any file, an unnamed file held open, or a spool file.
func (b *testBundle) assertNothingLeft(t *testing.T) {
	t.Helper()
	b.assertObjects(t)
	if f := b.files(t); len(f) != 0 {
		t.Fatalf("files in bucket: %q", f)
	}
	if open := unnamedFilesUnder(t, b.root); len(open) != 0 {
		t.Fatalf("unnamed files of the store left open: %v", open)
	}
	b.assertSpoolEmpty(t)
}

func TestCheckInReaderFails(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		at   int
	}{
		{"WithinInlineHead", threshold / 2},
		{"AfterHead", 3 * threshold},
		{"Immediately", 0},
	} {
		for _, ps := range postures(t, tc.name) {
			t.Run(ps.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, ps.opts)
				data := randomBytes(tc.at, 11)
				tk, err := b.store.CheckIn(b.ctx, "acme", &failingReader{data: data, err: errReader}, nil)
				if tk != nil {
					t.Fatalf("CheckIn returned a ticket: %v", tk)
				}
				if err == nil {
					t.Fatal("CheckIn succeeded over a failing reader")
				}
				// "the reader's own error, wrapped" (CheckIn's documentation).
				assertIs(t, err, errReader)
				if claimcheck.IsPermanent(err) {
					t.Fatalf("a reader failure is permanent: %v", err)
				}
				b.assertNothingLeft(t)
			})
		}
	}
}

// cancellingReader cancels its context once it has delivered after bytes
// (or, with after < 0, when it reports io.EOF), and keeps delivering data
// (a reader that ignores contexts, like most do).
type cancellingReader struct {
	r      io.Reader
	after  int
	n      int
	cancel context.CancelFunc
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	if (c.after >= 0 && c.n >= c.after) || (c.after < 0 && err == io.EOF) {
		c.cancel()
	}
	return n, err
}

func TestCheckInCancelled(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name  string
		size  int
		after int
	}{
		{"DuringStream", 4 << 20, 1 << 20},
		{"AfterLastByte", 1 << 20, 1 << 20},
		{"AtEOF", 1 << 20, -1}, // the whole payload is read: cancelled before the commit
	} {
		for _, ps := range postures(t, tc.name) {
			t.Run(ps.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, ps.opts)
				ctx, cancel := context.WithCancel(b.ctx)
				defer cancel()
				r := &cancellingReader{r: bytes.NewReader(randomBytes(tc.size, 13)), after: tc.after, cancel: cancel}
				tk, err := b.store.CheckIn(ctx, "acme", r, nil)
				if tk != nil {
					t.Fatalf("cancelled CheckIn returned a ticket: %v", tk)
				}
				assertIs(t, err, context.Canceled)
				assertIs(t, err, claimcheck.ErrUnavailable)
				if claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonUnavailable {
					t.Fatalf("IsPermanent=%v Reason=%q", claimcheck.IsPermanent(err), claimcheck.Reason(err))
				}
				b.assertNothingLeft(t)
			})
		}
	}

	t.Run("BeforeStart", func(t *testing.T) {
		t.Parallel()
		b := setupMem(t, nil)
		ctx, cancel := context.WithCancel(b.ctx)
		cancel()
		_, err := b.store.CheckIn(ctx, "acme", bytes.NewReader(randomBytes(threshold+1, 1)), nil)
		assertIs(t, err, context.Canceled)
		b.assertObjects(t)
	})
}

// TestCheckInFileDurability checks where and how a file:// check-in lands.
func TestCheckInFileDurability(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	data := randomBytes(300_000, 17)
	tk := b.checkIn(t, "acme", data, &claimcheck.CheckInOptions{ContentType: "application/pdf"})

	got, err := os.ReadFile(b.objectPath(tk.Key))
	if err != nil {
		t.Fatalf("object file: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("object file holds %d bytes (sha256 %s), want %d (%s)", len(got), sha256Hex(got), len(data), tk.SHA256)
	}
	want := []string{tk.Key, tk.Key + ".attrs"}
	if f := b.files(t); strings.Join(f, ",") != strings.Join(want, ",") {
		t.Fatalf("files in bucket = %q, want %q", f, want)
	}
	b.assertNoTempFiles(t)
	b.assertSpoolEmpty(t)

	attrs, err := b.store.Bucket().Attributes(b.ctx, tk.Key)
	if err != nil {
		t.Fatal(err)
	}
	if attrs.Size != int64(len(data)) || attrs.ContentType != "application/pdf" {
		t.Fatalf("attributes: size %d type %q", attrs.Size, attrs.ContentType)
	}
	for k, v := range map[string]string{"claimcheck-sha256": tk.SHA256, "claimcheck-size": "300000", "claimcheck-tenant": "acme"} {
		if attrs.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q", k, attrs.Metadata[k], v)
		}
	}
}

// TestCheckInCorpusTicketsFitBudget checks in every real PDF of the corpus,
// offloaded, and checks each ticket's size on the wire.
func TestCheckInCorpusTicketsFitBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, &claimcheck.Options{AlwaysOffload: true})
	tenant := strings.Repeat("t", claimcheck.MaxTenantLen)
	for _, f := range corpus(t) {
		for _, opts := range []*claimcheck.CheckInOptions{
			{ContentType: "application/pdf"},
			{ContentType: "application/pdf", Name: "docs/" + f.name, Version: "2026-11-29T21.34.24Z"},
		} {
			tk := b.checkIn(t, tenant, f.data, opts)
			if tk.IsInline() || tk.Size != int64(len(f.data)) || tk.SHA256 != sha256Hex(f.data) {
				t.Fatalf("%s: ticket %v inline=%v", f.name, tk, tk.IsInline())
			}
			wire := mustMarshal(t, tk)
			if len(wire) > claimcheck.MaxTicketBytes {
				t.Fatalf("%s: ticket is %d bytes, budget %d", f.name, len(wire), claimcheck.MaxTicketBytes)
			}
			parsed, err := claimcheck.ParseTicket(wire)
			if err != nil {
				t.Fatalf("%s: ParseTicket: %v", f.name, err)
			}
			assertTicketsEqual(t, parsed, tk)
		}
	}
}

func TestStoreConfig(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	for name, tc := range map[string]struct {
		url  string
		opts *claimcheck.Options
		msg  string
	}{
		"ThresholdOverSQSLimit": {"mem://", &claimcheck.Options{InlineThreshold: 256 << 10, MaxMessageSize: 262_144}, "above the transport's maximum message size"},
		"DefaultThresholdTiny":  {"mem://", &claimcheck.Options{MaxMessageSize: 64 << 10}, "above the transport's maximum message size"},
		"BelowTicketBudget":     {"mem://", &claimcheck.Options{AlwaysOffload: true, MaxMessageSize: 511}, "maximum message size of 511 bytes"},
		"NegativeMaxSize":       {"mem://", &claimcheck.Options{MaxPayloadSize: -1}, "negative maximum payload size"},
		"BadName":               {"mem://", &claimcheck.Options{Name: "Prod"}, "store name"},
		"LongName":              {"mem://", &claimcheck.Options{Name: strings.Repeat("s", claimcheck.MaxStoreNameLen+1)}, "store name"},
		"NoScheme":              {"/tmp/x", nil, "store URL"},
		"UnknownScheme":         {"nope://bucket", nil, "open store nope"},
		"RelativeFile":          {"file://", nil, "absolute path"},
		"BadFileQuery":          {"file://" + t.TempDir() + "?bogus=1", nil, "open store file"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := claimcheck.OpenStore(ctx, tc.url, tc.opts)
			if s != nil {
				s.Close()
				t.Fatal("OpenStore returned a store")
			}
			assertIs(t, err, claimcheck.ErrConfig)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
			if claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonConfig {
				t.Fatalf("IsPermanent=%v Reason=%q", claimcheck.IsPermanent(err), claimcheck.Reason(err))
			}
		})
	}

	t.Run("NewStore", func(t *testing.T) {
		t.Parallel()
		bs := setupMem(t, nil).store.Bucket()
		_, err := claimcheck.NewStore(bs, &claimcheck.Options{InlineThreshold: 256 << 10, MaxMessageSize: 262_144, SpoolDir: t.TempDir()})
		assertIs(t, err, claimcheck.ErrConfig)
		s, err := claimcheck.NewStore(bs, &claimcheck.Options{MaxMessageSize: 262_144, SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatalf("default threshold under SQS's 256 KiB: %v", err)
		}
		if err := s.Close(); err != nil { // does not close a bucket it was given
			t.Fatal(err)
		}
		if _, err := bs.Attributes(ctx, "x"); err == nil || strings.Contains(err.Error(), "closed") {
			t.Fatalf("bucket after NewStore's Close: %v", err)
		}
	})

	t.Run("LargestThresholdForLimit", func(t *testing.T) {
		t.Parallel()
		// The largest threshold whose inline tickets fit 256 KiB is allowed,
		// one byte more is not.
		const limit = 262_144
		th := int64(0)
		for claimcheck.InlineTicketSize(th+1) <= limit {
			th++
		}
		for _, tc := range []struct {
			th int64
			ok bool
		}{{th, true}, {th + 1, false}} {
			_, err := claimcheck.OpenStore(ctx, "mem://", &claimcheck.Options{InlineThreshold: tc.th, MaxMessageSize: limit, SpoolDir: t.TempDir()})
			if (err == nil) != tc.ok {
				t.Errorf("threshold %d under %d: error %v, want ok=%v", tc.th, limit, err, tc.ok)
			}
		}
	})

	// A host in a file:// URL is not part of the path: "file://data/claims"
	// means the directory /claims to fileblob, not ./data/claims, and
	// file://./data/claims is fileblob's relative form, which OpenStore would
	// create at /data/claims. Both must be refused, not silently opened.
	t.Run("FileWithHost", func(t *testing.T) {
		t.Parallel()
		for _, host := range []string{"example.com", "data", "."} {
			dir := t.TempDir()
			s, err := claimcheck.OpenStore(ctx, "file://"+host+dir, &claimcheck.Options{SpoolDir: t.TempDir()})
			if s != nil {
				s.Close()
			}
			if !errors.Is(err, claimcheck.ErrConfig) {
				t.Errorf("OpenStore(file://%s%s) error = %v, want ErrConfig", host, dir, err)
			}
		}
		// file://localhost/abs is the standard spelling of file:///abs.
		dir := t.TempDir()
		s, err := claimcheck.OpenStore(ctx, "file://localhost"+dir, &claimcheck.Options{SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatalf("file://localhost%s: %v", dir, err)
		}
		defer s.Close()
		tk, err := s.CheckIn(ctx, "acme", bytes.NewReader(randomBytes(threshold+1, 1)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir + "/" + tk.Key); err != nil {
			t.Fatalf("object not under %s: %v", dir, err)
		}
	})

	t.Run("FileCreatesDirectory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir() + "/a/b/c"
		s, err := claimcheck.OpenStore(ctx, "file://"+dir, &claimcheck.Options{SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("store directory: %v", err)
		}
	})
}

package claimcheck_test

// Store.PresignedURL against a real S3 server (SeaweedFS), skipped when
// CLAIMCHECK_TEST_S3_URL is unset: the URL serves the exact bytes until it
// expires, then fails, and fails with any character of its query changed.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/storetest"
)

// fetch GETs u and returns the status and body; status 0 when the server
// closed the connection without a response (SeaweedFS does, for some
// malformed presigned queries: its handler panics).
func fetch(t *testing.T, u string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil || !errors.Is(err, io.EOF) {
			t.Fatalf("GET presigned URL: %v", err)
		}
		return 0, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// mutate returns s with the byte at i replaced by another that is not
// equivalent to it: the next digit or letter of the same case (never a
// case change, which percent-escapes and some names ignore), 'q' for
// punctuation.
func mutate(s string, i int) string {
	c := s[i]
	switch {
	case c >= '0' && c <= '9':
		c = '0' + (c-'0'+1)%10
	case c >= 'a' && c <= 'z':
		c = 'a' + (c-'a'+1)%26
	case c >= 'A' && c <= 'Z':
		c = 'A' + (c-'A'+1)%26
	default:
		c = 'q'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestS3PresignedURL(t *testing.T) {
	t.Parallel()
	b := setupS3(t, nil)
	data := storetest.Payload(61, 300<<10)
	tk, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(data), &claimcheck.CheckInOptions{Result: true, ContentType: "application/json"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.store.PresignedURL(b.ctx, tk, 10*time.Minute)
	if err != nil {
		t.Fatalf("PresignedURL: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for _, p := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		if q.Get(p) == "" {
			t.Fatalf("presigned URL lacks %s: %s", p, u.Redacted())
		}
	}
	if q.Get("X-Amz-Expires") != "600" {
		t.Errorf("X-Amz-Expires = %q, want 600", q.Get("X-Amz-Expires"))
	}
	if strings.Contains(raw, "claimcheck-test-secret") || strings.Contains(raw, "AWS_SECRET") {
		t.Fatal("the URL carries the secret key")
	}
	if code, body := fetch(t, raw); code != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET presigned URL: %d, %d bytes (equal %v), want 200 and the payload's %d bytes", code, len(body), bytes.Equal(body, data), len(data))
	}

	// Every character of the query, and a sample of the path's: changed,
	// the URL must not serve the object.
	query := u.RawQuery
	tried, codes := 0, map[int]int{}
	for i := range len(query) {
		v := *u
		v.RawQuery = mutate(query, i)
		code, body := fetch(t, v.String())
		tried++
		codes[code]++
		if code/100 == 2 || bytes.Equal(body, data) {
			t.Errorf("query changed at %d (%q → %q): %d, want a refusal", i, query[max(0, i-8):min(len(query), i+8)], v.RawQuery[max(0, i-8):min(len(query), i+8)], code)
		}
	}
	for i := len(u.Path) - 1; i > len(u.Path)-40 && i > 0; i -= 3 {
		v := *u
		v.Path = mutate(u.Path, i)
		if code, body := fetch(t, v.String()); code/100 == 2 || bytes.Equal(body, data) {
			t.Errorf("path changed at %d: %d, want a refusal", i, code)
		}
		tried++
	}
	t.Logf("%d changed URLs refused (%d query characters, every one); query statuses %v (0: connection closed)", tried, len(query), codes)
	if code, body := fetch(t, raw); code != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("the unchanged URL afterwards: %d", code)
	}
}

// TestS3PresignedURLExpires: a URL valid for 2 s serves the object at once
// and is refused once the 2 s have passed.
func TestS3PresignedURLExpires(t *testing.T) {
	t.Parallel()
	b := setupS3(t, nil)
	data := storetest.Payload(62, 100<<10)
	tk, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	signed := time.Now()
	raw, err := b.store.PresignedURL(b.ctx, tk, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := fetch(t, raw); code != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("before expiry: %d, equal bytes %v", code, bytes.Equal(body, data))
	}
	// X-Amz-Date has whole seconds: wait past the last second it can cover.
	time.Sleep(time.Until(signed.Add(ttl + 1500*time.Millisecond)))
	code, body := fetch(t, raw)
	if code/100 == 2 || bytes.Equal(body, data) {
		t.Fatalf("after expiry: %d, want a refusal", code)
	}
	t.Logf("after expiry: %d %s", code, firstLine(body))
}

func firstLine(b []byte) string {
	s := string(b)
	if i := strings.Index(s, "<Code>"); i >= 0 {
		if j := strings.Index(s[i:], "</Code>"); j >= 0 {
			return s[i : i+j+len("</Code>")]
		}
	}
	return s[:min(len(s), 120)]
}

// TestS3PresignedURLRefused: no presigned URL for an encrypted store (it
// would hand out ciphertext), an inline ticket (no object), a missing
// object, a foreign ticket, or a lifetime out of range.
func TestS3PresignedURLRefused(t *testing.T) {
	t.Parallel()
	b := setupS3(t, nil)
	ctx := b.ctx

	enc := b.derived(t, &claimcheck.Options{Keeper: newKeeper(t)})
	tk, err := enc.CheckIn(ctx, b.tenant, bytes.NewReader(storetest.Payload(63, 100<<10)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.PresignedURL(ctx, tk, time.Minute); !errors.Is(err, claimcheck.ErrNoPresignedURL) {
		t.Errorf("encrypting store: %v, want ErrNoPresignedURL", err)
	}
	// The same encrypted object through a store without a keeper: the
	// object's own metadata says it is ciphertext.
	if _, err := b.store.PresignedURL(ctx, tk, time.Minute); !errors.Is(err, claimcheck.ErrNoPresignedURL) {
		t.Errorf("encrypted object, store without keeper: %v, want ErrNoPresignedURL", err)
	}

	inline, err := b.store.CheckIn(ctx, b.tenant, strings.NewReader("small"), nil)
	if err != nil || !inline.IsInline() {
		t.Fatalf("inline check-in: %v", err)
	}
	if _, err := b.store.PresignedURL(ctx, inline, time.Minute); !errors.Is(err, claimcheck.ErrNoPresignedURL) {
		t.Errorf("inline ticket: %v, want ErrNoPresignedURL", err)
	}

	gone, err := b.store.CheckIn(ctx, b.tenant, bytes.NewReader(storetest.Payload(64, 100<<10)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.DeleteObject(ctx, b.store, gone.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.PresignedURL(ctx, gone, time.Minute); !errors.Is(err, claimcheck.ErrPayloadMissing) {
		t.Errorf("deleted object: %v, want ErrPayloadMissing", err)
	}

	foreign := *gone
	foreign.Key = claimcheck.PrefixPayloads + "someone-else/" + gone.SHA256[:2] + "/" + gone.SHA256
	if _, err := b.store.PresignedURL(ctx, &foreign, time.Minute); !errors.Is(err, claimcheck.ErrTicketInvalid) {
		t.Errorf("key outside the ticket's tenant: %v, want ErrTicketInvalid", err)
	}

	ok, err := b.store.CheckIn(ctx, b.tenant, bytes.NewReader(storetest.Payload(65, 100<<10)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []time.Duration{0, 999 * time.Millisecond, claimcheck.MaxPresignTTL + time.Second} {
		if _, err := b.store.PresignedURL(ctx, ok, ttl); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("ttl %s: %v, want ErrConfig", ttl, err)
		}
	}
}

// TestPresignedURLFileStore: a file store cannot presign; the caller falls
// back to a claimcheck-served URL. No S3 server needed.
func TestPresignedURLFileStore(t *testing.T) {
	t.Parallel()
	s, err := claimcheck.OpenStore(t.Context(), "file://"+t.TempDir(), &claimcheck.Options{AlwaysOffload: true, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tk, err := s.CheckIn(t.Context(), "acme", strings.NewReader("file payload"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PresignedURL(t.Context(), tk, time.Minute); !errors.Is(err, claimcheck.ErrNoPresignedURL) {
		t.Fatalf("file store: %v, want ErrNoPresignedURL", err)
	}
}

package resulturl_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/resulturl"
)

// setup checks a real corpus PDF into a real file store and serves it as
// job 7's result.
type bundle struct {
	body   []byte
	signer *resulturl.Signer
	server *httptest.Server
	now    time.Time
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "objects")), &claimcheck.Options{SpoolDir: filepath.Join(dir, "tmp"), AlwaysOffload: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	body, err := os.ReadFile("../testdata/pdf/TeXShopAndAsymptote.pdf")
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader(string(body)), &claimcheck.CheckInOptions{ContentType: "application/pdf", Result: true})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{body: body, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	open := func(ctx context.Context, id int64) (io.ReadCloser, *claimcheck.Ticket, error) {
		if id != 7 {
			return nil, nil, claimcheck.Permanent(io.EOF)
		}
		p, err := store.Claim(ticket)
		if err != nil {
			return nil, nil, err
		}
		r, err := p.Open(ctx)
		if err != nil {
			return nil, nil, err
		}
		return struct {
			io.Reader
			io.Closer
		}{r, p}, ticket, nil
	}
	key := []byte(strings.Repeat("k", 32))
	serverSigner := &resulturl.Signer{Key: key, Now: func() time.Time { return b.now }}
	b.server = httptest.NewServer(resulturl.Handler(serverSigner, open, nil))
	t.Cleanup(b.server.Close)
	b.signer = &resulturl.Signer{Key: key, BaseURL: b.server.URL, Now: func() time.Time { return b.now }}
	return b
}

func get(t *testing.T, u string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		return 0, nil // a URL that no longer parses or connects fails too
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func TestSignedURLWorksUntilExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	u, err := b.signer.Sign(7, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, u)
	if code != http.StatusOK || string(body) != string(b.body) {
		t.Fatalf("before expiry: %d, %d bytes; want 200 and the %d-byte result", code, len(body), len(b.body))
	}
	b.now = b.now.Add(15*time.Minute - time.Second)
	if code, _ := get(t, u); code != http.StatusOK {
		t.Fatalf("one second before expiry: %d", code)
	}
	b.now = b.now.Add(time.Second)
	if code, _ := get(t, u); code != http.StatusForbidden {
		t.Fatalf("at expiry: %d, want 403", code)
	}
}

// TestSignedURLFailsWhenAnyCharacterChanges changes each character of the
// path and query in turn.
func TestSignedURLFailsWhenAnyCharacterChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	u, err := b.signer.Sign(7, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	start := len(b.server.URL) // host and scheme changes reach no server at all
	for i := start; i < len(u); i++ {
		for _, c := range []byte{'0', 'A', '_'} {
			if u[i] == c {
				continue
			}
			changed := u[:i] + string(c) + u[i+1:]
			if code, _ := get(t, changed); code == http.StatusOK {
				t.Errorf("URL with byte %d changed to %q still works: %s", i, c, changed)
			}
			break
		}
	}
	// Appending or dropping parts fails too.
	for _, changed := range []string{u + "&x=1", strings.Replace(u, "&sig=", "&sig=&sig=", 1), u[:strings.Index(u, "?")]} {
		if code, _ := get(t, changed); code == http.StatusOK {
			t.Errorf("%s still works", changed)
		}
	}
	// A URL signed with another key fails.
	other := &resulturl.Signer{Key: []byte(strings.Repeat("x", 32)), BaseURL: b.server.URL, Now: b.signer.Now}
	forged, _ := other.Sign(7, time.Hour)
	if code, _ := get(t, forged); code != http.StatusForbidden {
		t.Errorf("URL signed with another key: %d", code)
	}
}

func TestSignRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := &resulturl.Signer{Key: []byte(strings.Repeat("k", 32)), BaseURL: "http://127.0.0.1:8080"}
	for _, ttl := range []time.Duration{0, -time.Minute, resulturl.MaxTTL + time.Second} {
		if _, err := s.Sign(1, ttl); err == nil {
			t.Errorf("ttl %s accepted", ttl)
		}
	}
	for _, base := range []string{"", "ftp://x", "127.0.0.1:8080", "http://"} {
		bad := *s
		bad.BaseURL = base
		if _, err := bad.Sign(1, time.Minute); err == nil {
			t.Errorf("base URL %q accepted", base)
		}
	}
	short := *s
	short.Key = []byte("short")
	if _, err := short.Sign(1, time.Minute); err == nil {
		t.Error("a short key accepted")
	}
	if _, err := s.Verify("/v1/results/01", url.Values{"exp": {"1"}, "sig": {"x"}}); err == nil {
		t.Error("a non-canonical job id accepted")
	}
}

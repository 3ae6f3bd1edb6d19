package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeAPISealsPayloads: serve on a deployment that has no payload key
// yet makes it, as submit would, so a payload submitted over the API is
// sealed and `work` (which requires encryption) works it.
func TestServeAPISealsPayloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ok("migrate")
	base := b.serveConsole("127.0.0.1:0")
	if _, err := os.Stat(filepath.Join(b.data, "keys", "kek.key")); err != nil {
		t.Fatalf("serve made no payload key: %v", err)
	}
	payload := bytes.Repeat([]byte("sealed over the API "), 10<<10) // offloaded
	resp, err := http.Post(base+"/v1/jobs?kind=echo&tenant=acme", "text/plain", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var s struct {
		ID int64 `json:"id"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &s) != nil {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	b.ok("work", "--kind", "echo", "--until-empty", "--exec", "--", "cat")
	resp, err = http.Get(base + "/v1/jobs/1/result")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, payload) {
		t.Fatalf("result: %d, %d bytes (%s), want the payload back", resp.StatusCode, len(got), strings.TrimSpace(string(got[:min(len(got), 200)])))
	}
}

// TestServeAPIRefusalsJSON: serve answers a route's path with another
// method 405 with Allow and the API's JSON body (not 404), and headers
// over httpapi.MaxHeaderBytes 431 with it (not net/http's text/plain,
// which serve's http.Server.MaxHeaderBytes keeps for headers over
// httpapi.ServerMaxHeaderBytes).
func TestServeAPIRefusalsJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ok("migrate")
	base := b.serveConsole("127.0.0.1:0")
	for _, c := range []struct {
		method, path string
		hdr          string
		status       int
		reason       string
	}{
		{"GET", "/v1/claims", "", 405, "method-not-allowed"},
		{"GET", "/v1/jobs/1", strings.Repeat("x", 70<<10), 431, "headers-too-large"},
		{"POST", "/v1/jobs/1/cancel", "", 404, "job-not-found"},
		{"GET", "/v1/dead?limit=5", "", 200, ""},
	} {
		req, err := http.NewRequestWithContext(t.Context(), c.method, base+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.hdr != "" {
			req.Header.Set("X-Big", c.hdr)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Reason string `json:"reason"`
		}
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil || e.Reason != c.reason {
			t.Errorf("%s %s: %d %s %.200s, want %d JSON reason %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.status, c.reason)
		}
		if c.status == 405 && resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s %s: Allow %q, want POST", c.method, c.path, resp.Header.Get("Allow"))
		}
	}
}

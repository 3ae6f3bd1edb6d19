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

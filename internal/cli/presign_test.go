package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"github.com/claimcheck/claimcheck/internal/testenv"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

type urlJSON struct {
	URL      string    `json:"url"`
	Expires  time.Time `json:"expires"`
	ServedBy string    `json:"served_by"`
	SHA256   string    `json:"sha256"`
	Size     int64     `json:"size"`
}

func s3StoreURL(t *testing.T) string {
	t.Helper()
	u := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", "scripts/seaweedfs.sh env prints it")
	// Each test's job database owns a namespace of its own.
	return ownNamespace(t, u, "presign-"+strconv.FormatInt(time.Now().UnixNano(), 36))
}

func get(t *testing.T, u string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// resultJob submits payload (random bytes of n) and works it with cat, so
// the job's result is the payload; it returns the job id and the bytes.
func (b *cliBundle) resultJob(global []string, n int) (int64, []byte) {
	b.t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	path := filepath.Join(b.t.TempDir(), "payload.bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.t.Fatal(err)
	}
	j := b.submit(append(global, "--kind", "echo", "--tenant", "acme", path)...)
	b.ok(append(global, "work", "--kind", "echo", "--until-empty", "--exec", "--", "cat")...)
	return j.ID, data
}

func (b *cliBundle) url(args ...string) (urlJSON, result) {
	b.t.Helper()
	r := b.run("", append([]string{"--json", "url"}, args...)...)
	if r.code != 0 {
		b.t.Fatalf("url %v: exit %d\n%s", args, r.code, r.stderr)
	}
	var u urlJSON
	if err := json.Unmarshal([]byte(r.stdout), &u); err != nil {
		b.t.Fatalf("url --json: %v\n%s", err, r.stdout)
	}
	return u, r
}

// TestURLPresignedS3: on an S3 store without payload encryption, url gives
// an S3 presigned URL that serves the exact result until it expires and not
// after; it is stored nowhere in the data directory (job database included).
func TestURLPresignedS3(t *testing.T) {
	t.Parallel()
	s3 := s3StoreURL(t)
	b := setup(t)
	global := []string{"--store", s3, "--keeper", "none", "--always-offload"}
	id, data := b.resultJob(global, 300<<10)
	job := strconv.FormatInt(id, 10)

	u, r := b.url(append(global, job, "--ttl", "2s")...)
	if u.ServedBy != "s3" || u.Size != int64(len(data)) || len(u.SHA256) != 64 {
		t.Fatalf("url --json = %+v, want served_by s3 with the result's sha256 and size", u)
	}
	if r.stderr != "" {
		t.Errorf("url printed on stderr: %s", r.stderr)
	}
	parsed, err := url.Parse(u.URL)
	if err != nil {
		t.Fatal(err)
	}
	store, _ := url.Parse(s3)
	sig := parsed.Query().Get("X-Amz-Signature")
	if !strings.HasPrefix(u.URL, store.Query().Get("endpoint")+"/") || sig == "" || parsed.Query().Get("X-Amz-Expires") != "2" {
		t.Fatalf("not a presigned URL on the store's endpoint, valid 2 s: %s", parsed.Redacted())
	}
	if code, body := get(t, u.URL); code != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("before expiry: %d, equal bytes %v", code, bytes.Equal(body, data))
	}
	time.Sleep(3500 * time.Millisecond)
	if code, body := get(t, u.URL); code/100 == 2 || bytes.Equal(body, data) {
		t.Fatalf("after expiry: %d, want a refusal", code)
	}

	// Plain text: the URL alone, on one line.
	out := b.ok(append(global, "url", job, "--ttl", "1m")...)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "X-Amz-Signature=") {
		t.Fatalf("url printed %q, want one presigned URL", out)
	}
	// --served: claimcheck's own URL even here.
	if s, _ := b.url(append(global, job, "--served")...); s.ServedBy != "claimcheck" || !strings.Contains(s.URL, "/v1/results/"+job+"?") {
		t.Fatalf("url --served = %+v", s)
	}

	// Never stored: no file of the data directory holds a signature.
	_ = filepath.WalkDir(b.data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range []string{sig, "X-Amz-Signature", "X-Amz-Credential"} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s holds %q: a presigned URL was stored", p, s)
			}
		}
		return nil
	})
	if code, _ := get(t, u.URL); code/100 == 2 {
		t.Fatal("expired URL works again")
	}
}

// TestURLInlineResultServed: an inline result has no object to presign:
// url says so on stderr and gives a URL claimcheck serves.
func TestURLInlineResultServed(t *testing.T) {
	t.Parallel()
	s3 := s3StoreURL(t)
	b := setup(t)
	global := []string{"--store", s3, "--keeper", "none"}
	id, _ := b.resultJob(global, 2<<10)
	u, r := b.url(append(global, strconv.FormatInt(id, 10))...)
	if u.ServedBy != "claimcheck" || !strings.Contains(r.stderr, "inline") || !strings.Contains(r.stderr, "claimcheck serve") {
		t.Fatalf("inline result: %+v, stderr %q; want a claimcheck URL and a note", u, r.stderr)
	}
}

// TestURLEncryptedServed: with payload encryption on (the default keeper),
// url gives claimcheck's signed URL, never a presigned one (it would hand
// out ciphertext), and serve answers it with the decrypted, verified bytes.
func TestURLEncryptedServed(t *testing.T) {
	t.Parallel()
	s3 := s3StoreURL(t)
	b := setup(t)
	global := []string{"--store", s3, "--always-offload"}
	id, data := b.resultJob(global, 300<<10)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var serveErr bytes.Buffer
	go func() {
		done <- Run(ctx, append([]string{"--data", b.data}, append(global, "serve", "--addr", "127.0.0.1:0")...), strings.NewReader(""), pw, &serveErr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve: %v (%s)", err, serveErr.String())
	}
	go io.Copy(io.Discard, pr)
	base := strings.TrimSuffix(strings.TrimSpace(line[strings.Index(line, "http://"):]), "/v1/results/")

	u, _ := b.url(append(global, strconv.FormatInt(id, 10), "--base-url", base)...)
	if u.ServedBy != "claimcheck" || strings.Contains(u.URL, "X-Amz-") || !strings.HasPrefix(u.URL, base+"/v1/results/") || u.SHA256 != "" {
		t.Fatalf("encrypted store: %+v, want claimcheck's URL", u)
	}
	if code, body := get(t, u.URL); code != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("serve: %d, equal bytes %v", code, bytes.Equal(body, data))
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d: %s", code, serveErr.String())
	}
}

// TestURLTTLBounds: a lifetime outside 1s to 7 days is a usage error,
// before anything is opened.
func TestURLTTLBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, ttl := range []string{"0s", "500ms", "169h"} {
		if r := b.run("", "url", "1", "--ttl", ttl); r.code != 2 || !strings.Contains(r.stderr, "--ttl") {
			t.Errorf("url --ttl %s: exit %d %q, want 2", ttl, r.code, r.stderr)
		}
	}
}

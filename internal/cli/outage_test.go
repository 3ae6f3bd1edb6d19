package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/outageproxy"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// payloadFile writes n random bytes (above the inline threshold when n >
// 64 KiB, so they go to the store) to a file and returns its path.
func payloadFile(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "payload.bin")
	if err := os.WriteFile(p, []byte(rand.Text()+strings.Repeat("x", n)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// withEndpoint returns the s3:// store URL s3URL with its endpoint replaced
// by http://addr and extra parameters added.
func withEndpoint(t *testing.T, s3URL, addr string, extra url.Values) string {
	t.Helper()
	u, err := url.Parse(s3URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("endpoint", "http://"+addr)
	for k, v := range extra {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// A store that accepts connections and never answers (a partition): submit
// fails within the stall bound (three SDK attempts of stall_timeout plus
// its backoff), naming the endpoint, and nothing is stored or enqueued.
// Not parallel: it sets the AWS environment.
func TestSubmitStalledStoreFailsCleanly(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "claimcheck-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "claimcheck-test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	silent := outageproxy.Silent(t)
	store := withEndpoint(t, "s3://claimcheck-test?region=us-east-1&use_path_style=true", silent, url.Values{"stall_timeout": {"500ms"}})
	b := setup(t)
	start := time.Now()
	r := b.run("", "--store", store, "submit", "--kind", "stall", "--tenant", "acme", payloadFile(t, 100<<10))
	elapsed := time.Since(start)
	if r.code == 0 {
		t.Fatalf("submit to a silent store succeeded: %s", r.stdout)
	}
	for _, want := range []string{"unavailable", "no progress on the connection to " + silent, "500ms"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("submit's error %q does not say %q", r.stderr, want)
		}
	}
	if strings.Contains(r.stderr, "payloads/") {
		t.Errorf("submit's error names an object key: %q", r.stderr)
	}
	if elapsed > 15*time.Second {
		t.Errorf("submit failed after %v; with stall_timeout=500ms the bound is 3 × 500ms plus the SDK's backoff", elapsed)
	}
	if js := b.jobs(); len(js) != 0 {
		t.Errorf("a failed submit left jobs: %+v", js)
	}
	t.Logf("submit to a silent store: exit %d after %v: %s", r.code, elapsed, strings.TrimSpace(r.stderr))
}

// A worker whose store falls silent mid-job (a proxy in front of the real
// S3 server stops passing the server's bytes): the attempt fails within the
// stall bound as store-unavailable, naming the endpoint, is retried, and
// completes once the store answers again.
func TestWorkStalledStoreIsRetried(t *testing.T) {
	s3URL := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", `eval "$(scripts/seaweedfs.sh env)"`)
	u, err := url.Parse(s3URL)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := url.Parse(u.Query().Get("endpoint"))
	if err != nil || ep.Host == "" {
		t.Fatalf("CLAIMCHECK_TEST_S3_URL %s has no endpoint=http://host:port", s3URL)
	}
	proxy := outageproxy.New(t, ep.Host)
	store := withEndpoint(t, s3URL, proxy.Addr(), url.Values{"stall_timeout": {"500ms"}})
	b := setup(t)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	kind, tenant := "stall"+suffix, "infra"+suffix
	j := b.submit("--store", store, "--kind", kind, "--tenant", tenant, payloadFile(t, 100<<10))

	proxy.Freeze()
	frozen := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan result, 1)
	var errOut syncBuffer // work's standard error, read while it runs
	go func() {
		var out strings.Builder
		code := Run(ctx, []string{"--data", b.data, "--store", store, "work", "--kind", kind, "--until-empty", "--exec", "--", "cat"},
			strings.NewReader(""), &out, &errOut)
		done <- result{out.String(), errOut.String(), code}
	}()

	// The first attempt fails as store-unavailable within the bound: the
	// job records the error, or (when the attempt is given back, not
	// spent) work reports it.
	var failed string
	for failed == "" {
		if time.Since(frozen) > 30*time.Second {
			t.Fatalf("no attempt failed within 30 s of the store falling silent; work said:\n%s", errOut.String())
		}
		for _, line := range strings.Split(errOut.String(), "\n") {
			if strings.Contains(line, "store-unavailable") {
				failed = line
				break
			}
		}
		if failed != "" {
			break
		}
		time.Sleep(200 * time.Millisecond)
		var in struct {
			Job struct {
				State, Reason, Error string
				Attempts             int
			} `json:"job"`
		}
		out := b.ok("--store", s3URL, "inspect", "--json", strconv.FormatInt(j.ID, 10))
		if err := json.Unmarshal([]byte(out), &in); err != nil {
			t.Fatalf("inspect --json: %v\n%s", err, out)
		}
		if in.Job.State == "completed" || in.Job.State == "discarded" || in.Job.State == "cancelled" {
			t.Fatalf("job %s while the store is silent: %+v", in.Job.State, in.Job)
		}
		failed = in.Job.Error
	}
	if !strings.Contains(failed, "store-unavailable") || !strings.Contains(failed, "no progress on the connection to "+proxy.Addr()) {
		t.Fatalf("attempt failed with %q, want store-unavailable naming %s", failed, proxy.Addr())
	}
	t.Logf("attempt failed %v after the store fell silent: %s", time.Since(frozen).Round(time.Millisecond), failed)

	proxy.Restore()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("work --until-empty did not finish after the store answered again")
	}
	if r.code != 0 {
		t.Fatalf("work: exit %d\n%s", r.code, r.stderr)
	}
	var final []jobJSON
	if err := json.Unmarshal([]byte(b.ok("jobs", "--json", "--kind", kind)), &final); err != nil || len(final) != 1 || final[0].State != "completed" {
		t.Fatalf("after the store answered again: %+v (%v), want one completed job", final, err)
	}
	t.Logf("completed %v after the store fell silent, attempts %d", time.Since(frozen).Round(time.Millisecond), final[0].Attempts)
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

package cli

import (
	"crypto/rand"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	return withParams(t, s3URL, url.Values{"endpoint": {"http://" + addr}}, extra)
}

// withParams returns the URL raw with the parameters of each set added.
func withParams(t *testing.T, raw string, sets ...url.Values) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for _, set := range sets {
		for k, v := range set {
			q[k] = v
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// ownNamespace returns s3URL with a namespace (prefix) of the test's own:
// a namespace belongs to one job database, and each test has its own.
func ownNamespace(t *testing.T, s3URL, name string) string {
	t.Helper()
	return withParams(t, s3URL, url.Values{"prefix": {name + "/"}})
}

// proxiedStore returns the s3:// store URL s3URL with its endpoint
// behind an outage proxy of its own, and extra parameters added.
func proxiedStore(t *testing.T, s3URL string, extra url.Values) (string, *outageproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(s3URL)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := url.Parse(u.Query().Get("endpoint"))
	if err != nil || ep.Host == "" {
		t.Fatalf("CLAIMCHECK_TEST_S3_URL %s has no endpoint=http://host:port", s3URL)
	}
	proxy := outageproxy.New(t, ep.Host)
	return withEndpoint(t, s3URL, proxy.Addr(), extra), proxy
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
	// Nothing enqueued: no jobs, or no job database at all (the first
	// submit of a data directory checks the store for sealed payloads
	// before it makes a key file, and fails there).
	if r := b.run("", "--json", "jobs"); !(r.code == 0 && strings.TrimSpace(r.stdout) == "[]") && !strings.Contains(r.stderr, "no job database") {
		t.Errorf("a failed submit left jobs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("submit to a silent store: exit %d after %v: %s", r.code, elapsed, strings.TrimSpace(r.stderr))
}

// A worker whose store is silent (a proxy in front of the real S3 server
// passes nothing back): work fails within the stall bound naming the
// endpoint instead of hanging, and works the job once the store answers.
// (Unavailability met by a running attempt is retried inside the attempt,
// silently; TestWorkSurvivesS3Outage covers it.)
func TestWorkStalledStoreFailsWithinBound(t *testing.T) {
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	s3URL := ownNamespace(t, testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", `eval "$(scripts/seaweedfs.sh env)"`), "stall"+suffix)
	store, proxy := proxiedStore(t, s3URL, url.Values{"stall_timeout": {"500ms"}})
	b := setup(t)
	kind, tenant := "stall"+suffix, "infra"+suffix
	b.submit("--store", store, "--kind", kind, "--tenant", tenant, payloadFile(t, 100<<10))

	proxy.Freeze()
	start := time.Now()
	r := b.run("", "--store", store, "work", "--kind", kind, "--until-empty", "--exec", "--", "cat")
	elapsed := time.Since(start)
	if r.code == 0 || !strings.Contains(r.stderr, "unavailable") || !strings.Contains(r.stderr, "no progress on the connection to "+proxy.Addr()) {
		t.Fatalf("work with a silent store: exit %d after %v\n%s\nwant a failure naming %s", r.code, elapsed, r.stderr, proxy.Addr())
	}
	if elapsed > 15*time.Second {
		t.Errorf("work with a silent store failed after %v; with stall_timeout=500ms the bound is 3 × 500ms plus the SDK's backoff", elapsed)
	}
	t.Logf("work with a silent store: exit %d after %v: %s", r.code, elapsed, strings.TrimSpace(r.stderr))

	proxy.Restore()
	b.ok("--store", store, "work", "--kind", kind, "--until-empty", "--exec", "--", "cat")
	var final []jobJSON
	if err := json.Unmarshal([]byte(b.ok("jobs", "--json", "--kind", kind)), &final); err != nil || len(final) != 1 || final[0].State != "completed" {
		t.Fatalf("after the store answered again: %+v (%v), want one completed job", final, err)
	}
}

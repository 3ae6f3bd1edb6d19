package cli

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
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
	// Nothing enqueued: no jobs, or no job database or data directory at
	// all (the first submit of a data directory checks the store for
	// sealed payloads before it makes a key file, fails there, and removes
	// the data directory it made).
	if r := b.run("", "--json", "jobs"); !(r.code == 0 && strings.TrimSpace(r.stdout) == "[]") && !strings.Contains(r.stderr, "no job database") && !strings.Contains(r.stderr, "holds no claimcheck data") {
		t.Errorf("a failed submit left jobs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("submit to a silent store: exit %d after %v: %s", r.code, elapsed, strings.TrimSpace(r.stderr))
}

// A worker whose store is silent (a proxy in front of the real S3 server
// passes nothing back): work fails within the stall bound naming the
// endpoint instead of hanging, and works the job once the store answers.
// (A stall met by a running attempt: TestWorkAttemptStalledStoreRetried;
// an outage: TestWorkSurvivesS3Outage.)
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

// A store connection that stalls during an attempt (the proxy in front of
// the real S3 server passes nothing back once the worker is running, and
// a job arrives): the attempt's claim fails as store-unavailable within
// the stall bound, naming the endpoint; work says so on standard error,
// the job is retried without spending its attempt, and it completes on
// attempt 1 once the store answers again. On the job database the job
// waits in the queue (state scheduled); on a broker the consumer holds the
// delivery and tries again in place.
func TestWorkAttemptStalledStoreRetried(t *testing.T) {
	s3 := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", `eval "$(scripts/seaweedfs.sh env)"`)
	sources := map[string]func(t *testing.T) []string{"SQLite": func(*testing.T) []string { return nil }}
	if os.Getenv("CLAIMCHECK_TEST_AMQP_URL") != "" || os.Getenv("CI") != "" {
		sources["RabbitMQ"] = func(t *testing.T) []string { return []string{"--broker", brokers[0].url(t)} }
	}
	for name, flags := range sources {
		t.Run(name, func(t *testing.T) {
			global := flags(t)
			suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
			s3URL := ownNamespace(t, s3, "astall"+suffix)
			store, proxy := proxiedStore(t, s3URL, url.Values{"stall_timeout": {"500ms"}})
			b := setup(t)
			kind, tenant := "astall"+suffix, "infra"+suffix
			first := b.submit(append(global, "--store", store, "--kind", kind, "--tenant", tenant, payloadFile(t, 100<<10))...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wait := b.bg(ctx, append(global, "--store", store, "work", "--kind", kind, "--exec", "--", "cat")...)
			waitState := func(id int64, within time.Duration, ok func(jobJSON) bool) (jobJSON, time.Duration) {
				t.Helper()
				start := time.Now()
				for time.Since(start) < within {
					for _, j := range b.jobs("--kind", kind) {
						if j.ID == id && ok(j) {
							return j, time.Since(start)
						}
					}
					time.Sleep(100 * time.Millisecond)
				}
				t.Fatalf("job %d: not in the state wanted within %s: %+v", id, within, b.jobs("--kind", kind))
				return jobJSON{}, 0
			}
			waitState(first.ID, time.Minute, func(j jobJSON) bool { return j.State == "completed" })

			// The worker holds connections to the store; from now on they
			// answer nothing. The job is submitted straight to the store.
			proxy.Freeze()
			second := b.submit(append(global, "--store", s3URL, "--kind", kind, "--tenant", tenant, payloadFile(t, 100<<10))...)
			if global == nil {
				_, took := waitState(second.ID, time.Minute, func(j jobJSON) bool { return j.State != "available" && j.State != "running" })
				t.Logf("job %d: its attempt on a silent store ended after %v (River's fetch included)", second.ID, took.Round(100*time.Millisecond))
				if took > 20*time.Second {
					t.Errorf("the attempt on a silent store ended after %v; with stall_timeout=500ms the bound is 3 × 500ms plus the SDK's backoff per call", took)
				}
			} else {
				time.Sleep(8 * time.Second) // the consumer meets the stall
			}
			proxy.Restore()
			j, _ := waitState(second.ID, 2*time.Minute, func(j jobJSON) bool { return j.State == "completed" })
			cancel()
			r := wait()
			want := fmt.Sprintf("job %d: attempt 1 failed (store-unavailable), waiting, next try in ", second.ID)
			if global != nil {
				want = "(attempt 1) held, unavailable for"
			}
			if r.code != 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "no progress on the connection to "+proxy.Addr()) {
				t.Errorf("work: exit %d; want 0 and %q naming %s\nstderr: %s", r.code, want, proxy.Addr(), r.stderr)
			}
			if j.Attempts != 1 {
				t.Errorf("job %d after the stall: %+v, want completed on attempt 1", second.ID, j)
			}
			for _, line := range strings.Split(r.stderr, "\n") {
				if strings.Contains(line, want) {
					t.Logf("work said: %s", line)
					break
				}
			}
		})
	}
}

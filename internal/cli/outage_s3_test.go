package cli

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/testenv"
)

// EnvS3Outage sets how long TestWorkSurvivesS3Outage cuts the store (a Go
// duration); default 40s, long enough that a policy spending attempts on
// unavailability kills the jobs (5 attempts at 1, 2, 4, 8 s did), short
// enough for CI. The figure is a 3-minute outage:
// CLAIMCHECK_TEST_S3_OUTAGE=3m.
const EnvS3Outage = "CLAIMCHECK_TEST_S3_OUTAGE"

// An S3 outage (a proxy in front of the real S3 server cuts every
// connection and refuses new ones) with jobs in flight and a small backlog:
// no job is dead, and all complete once the store is back. Unavailable
// infrastructure is retried over the retry window without spending the
// jobs' attempts (claimcheck.RetryPolicy).
func TestWorkSurvivesS3Outage(t *testing.T) {
	s3URL := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", `eval "$(scripts/seaweedfs.sh env)"`)
	outage := 40 * time.Second
	if v := os.Getenv(EnvS3Outage); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvS3Outage, v, err)
		}
		outage = d
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	store, proxy := proxiedStore(t, ownNamespace(t, s3URL, "outage"+suffix), url.Values{"connect_timeout": {"2s"}, "stall_timeout": {"5s"}})
	b := setup(t)
	kind, tenant := "outage"+suffix, "infra"+suffix
	const jobs = 6 // 2 in flight (--concurrency 2), 4 waiting
	for i := 0; i < jobs; i++ {
		b.submit("--store", store, "--kind", kind, "--tenant", tenant, "--max-attempts", "3", payloadFile(t, 100<<10))
	}

	ctx, cancel := context.WithTimeout(context.Background(), outage+8*time.Minute)
	defer cancel()
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		var out, errOut strings.Builder
		// Each handler takes 2 s and writes a result: the cut finds jobs
		// claiming, running and checking their results in.
		code := Run(ctx, []string{"--data", b.data, "--store", store, "work", "--kind", kind, "--concurrency", "2", "--until-empty",
			"--exec", "--", "sh", "-c", "sleep 2; cat"}, strings.NewReader(""), &out, &errOut)
		done <- result{out.String(), errOut.String(), code}
	}()
	// Cut once a job is running, so that work is past its start-up
	// checks (which refuse an unreachable store at once, by design): on
	// a loaded machine a fixed second was not always enough.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var js []jobJSON
		if err := json.Unmarshal([]byte(b.ok("jobs", "--json", "--kind", kind, "--state", "running")), &js); err != nil {
			t.Fatal(err)
		}
		if len(js) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no job running 2 minutes after work started")
		}
		select {
		case r := <-done:
			t.Fatalf("work ended before the outage: exit %d\n%s", r.code, r.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	proxy.Cut()
	t.Logf("store cut %v after work started, for %v", time.Since(start).Round(time.Millisecond), outage)
	select {
	case r := <-done:
		t.Fatalf("work ended during the outage: exit %d\n%s", r.code, r.stderr)
	case <-time.After(outage):
	}
	var during []jobJSON
	if err := json.Unmarshal([]byte(b.ok("jobs", "--json", "--kind", kind)), &during); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	restored := time.Now()
	for _, j := range during {
		t.Logf("at the end of the outage: job %d %s attempts %d %s", j.ID, j.State, j.Attempts, j.Reason)
		if j.State == "discarded" || j.State == "cancelled" || j.State == "dead" {
			t.Errorf("job %d at the end of the outage: %s (%s)", j.ID, j.State, j.Reason)
		}
	}
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatalf("work --until-empty did not finish %v after the store came back", time.Since(restored))
	}
	if r.code != 0 {
		t.Errorf("work: exit %d\n%s", r.code, r.stderr)
	}
	var final []jobJSON
	if err := json.Unmarshal([]byte(b.ok("jobs", "--json", "--kind", kind)), &final); err != nil {
		t.Fatal(err)
	}
	completed := 0
	for _, j := range final {
		if j.State == "completed" {
			completed++
		} else {
			t.Errorf("job %d after the outage: %s (%s), attempts %d", j.ID, j.State, j.Reason, j.Attempts)
		}
	}
	if completed != jobs {
		t.Errorf("%d of %d jobs completed", completed, jobs)
	}
	t.Logf("outage of %v: %d of %d jobs completed, the last %v after the store came back", outage, completed, jobs, time.Since(restored).Round(time.Second))
}

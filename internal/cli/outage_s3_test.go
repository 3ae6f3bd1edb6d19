package cli

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
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
// jobs' attempts (claimcheck.RetryPolicy). The fault trials run the same
// with a blackhole too (TestChaosS3Outage).
func TestWorkSurvivesS3Outage(t *testing.T) {
	outage := envDuration(t, EnvS3Outage, 40*time.Second)
	// 6 jobs: 2 in flight (--concurrency 2), 4 waiting.
	r := s3OutageTrial(t, "cut", outage, 6, 2)
	if r.completed != r.jobs {
		t.Errorf("%d of %d jobs completed", r.completed, r.jobs)
	}
}

// envDuration is the Go duration in the environment variable name, or def
// when it is not set.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// s3Outage is what s3OutageTrial saw.
type s3Outage struct {
	jobs, completed, dead int
	// recovered is how long after the store's return work --until-empty
	// returned, every job done.
	recovered time.Duration
	// runs is each job's handler runs, counted by the handler; finished
	// those that ran to their end.
	runs, finished map[string]int
	// during is what work printed on standard error while the store was
	// out, each line with its time since the outage began.
	during []string
}

// s3OutageTrial submits jobs to the S3 store (CLAIMCHECK_TEST_S3_URL)
// behind an outage proxy, runs work --until-empty with concurrency, and
// once a job is running takes the store away for outage: mode "cut"
// closes every connection and refuses new ones (outageproxy.Cut),
// "blackhole" lets connections in and passes nothing back
// (outageproxy.Freeze). Each handler takes 2 s, so the outage finds jobs
// claiming, running and checking their results in. It fails t when work
// ends during the outage or fails, or a job is dead at the outage's end.
func s3OutageTrial(t *testing.T, mode string, outage time.Duration, jobs, concurrency int) s3Outage {
	t.Helper()
	s3URL := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", `eval "$(scripts/seaweedfs.sh env)"`)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	store, proxy := proxiedStore(t, ownNamespace(t, s3URL, "outage"+suffix), url.Values{"connect_timeout": {"2s"}, "stall_timeout": {"5s"}})
	b := setup(t)
	kind, tenant := "outage"+suffix, "infra"+suffix
	for i := 0; i < jobs; i++ {
		b.submit("--store", store, "--kind", kind, "--tenant", tenant, "--max-attempts", "3", payloadFile(t, 100<<10))
	}
	runs := filepath.Join(t.TempDir(), "runs")

	ctx, cancel := context.WithTimeout(context.Background(), outage+8*time.Minute)
	defer cancel()
	done := make(chan result, 1)
	stderr := &stampedLines{}
	start := time.Now()
	go func() {
		var out strings.Builder
		code := Run(ctx, []string{"--data", b.data, "--store", store, "work", "--kind", kind, "--concurrency", strconv.Itoa(concurrency), "--until-empty",
			"--exec", "--", "sh", "-c", countedHandler(runs, "sleep 2; cat")}, strings.NewReader(""), &out, stderr)
		done <- result{out.String(), stderr.String(), code}
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
	switch mode {
	case "cut":
		proxy.Cut()
	case "blackhole":
		proxy.Freeze()
	default:
		t.Fatalf("outage mode %q", mode)
	}
	cut := time.Now()
	t.Logf("store %s %v after work started, for %v", mode, cut.Sub(start).Round(time.Millisecond), outage)
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
	o := s3Outage{jobs: jobs, during: stderr.between(cut, restored)}
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
	o.recovered = time.Since(restored)
	if r.code != 0 {
		t.Errorf("work: exit %d\n%s", r.code, r.stderr)
	}
	var final []jobJSON
	if err := json.Unmarshal([]byte(b.ok("jobs", "--json", "--kind", kind)), &final); err != nil {
		t.Fatal(err)
	}
	for _, j := range final {
		switch j.State {
		case "completed":
			o.completed++
		case "discarded", "cancelled":
			o.dead++
			t.Errorf("job %d after the outage: %s (%s), attempts %d", j.ID, j.State, j.Reason, j.Attempts)
		default:
			t.Errorf("job %d after the outage: %s (%s), attempts %d", j.ID, j.State, j.Reason, j.Attempts)
		}
	}
	o.runs, o.finished = handlerRuns(t, runs)
	t.Logf("%s outage of %v: %d of %d jobs completed, the last %v after the store came back; work printed %d lines during the outage",
		mode, outage, o.completed, jobs, o.recovered.Round(100*time.Millisecond), len(o.during))
	return o
}

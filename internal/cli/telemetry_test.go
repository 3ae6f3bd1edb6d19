package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/outageproxy"
	"github.com/claimcheck/claimcheck/internal/telemetry"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// runWith runs claimcheck in-process on ctx (carrying a Telemetry).
func (b *cliBundle) runWith(ctx context.Context, args ...string) result {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Run(ctx, append([]string{"--data", b.data}, args...), strings.NewReader(""), &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

// scrape GETs url (a /metrics) and parses it with Prometheus's text
// parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not Prometheus text format: %v", url, err)
	}
	return fams
}

// sample is one series' value: a counter's or gauge's value, a
// histogram's count and sum.
type sample struct{ value, count, sum float64 }

// total adds up the series of family name whose labels include want.
func total(fams map[string]*dto.MetricFamily, name string, want map[string]string) sample {
	var s sample
	f := fams[name]
	if f == nil {
		return s
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			s.value += m.Counter.GetValue()
		case m.Gauge != nil:
			s.value += m.Gauge.GetValue()
		case m.Histogram != nil:
			s.count += float64(m.Histogram.GetSampleCount())
			s.sum += m.Histogram.GetSampleSum()
		}
	}
	return s
}

// TestMetricsRun scrapes /metrics before and after run on the corpus and
// after a forced payload-missing: the counters and histograms move by the
// jobs, bytes and reasons of what ran.
func TestMetricsRun(t *testing.T) {
	t.Parallel()
	ctx, srv := metricsServer(t)

	entries, err := os.ReadDir(corpusPath)
	if err != nil {
		t.Fatal(err)
	}
	var files int
	var bytesIn int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".pdf") {
			st, err := os.Stat(filepath.Join(corpusPath, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files++
			bytesIn += st.Size()
		}
	}
	before := scrape(t, srv.URL+"/metrics")
	b := setup(t)
	if r := b.runWith(ctx, "run", corpusPath); r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	after := scrape(t, srv.URL+"/metrics")
	delta := func(name string, labels map[string]string) sample {
		a, b := total(after, name, labels), total(before, name, labels)
		return sample{a.value - b.value, a.count - b.count, a.sum - b.sum}
	}
	n := float64(files)
	for _, c := range []struct {
		name   string
		labels map[string]string
		value  float64 // a counter's increase
		count  float64 // a histogram's observations
	}{
		{"claimcheck_payload_checked_in_bytes_total", map[string]string{"claimcheck_role": "payload", "claimcheck_tenant": "local"}, float64(bytesIn), 0},
		{"claimcheck_payload_claimed_bytes_total", map[string]string{"claimcheck_tenant": "local", "claimcheck_kind": "pdf-info"}, float64(bytesIn), 0},
		{"claimcheck_job_attempts_total", map[string]string{"claimcheck_kind": "pdf-info", "claimcheck_outcome": "completed"}, n, 0},
		{"claimcheck_job_dead_letters_total", nil, 0, 0},
		{"claimcheck_check_in_duration_seconds", map[string]string{"claimcheck_role": "payload"}, 0, n},
		{"claimcheck_check_in_duration_seconds", map[string]string{"claimcheck_role": "result"}, 0, n},
		{"claimcheck_claim_duration_seconds", map[string]string{"claimcheck_kind": "pdf-info"}, 0, n},
		{"claimcheck_verify_duration_seconds", map[string]string{"claimcheck_kind": "pdf-info"}, 0, n},
		{"claimcheck_handler_duration_seconds", map[string]string{"claimcheck_kind": "pdf-info"}, 0, n},
	} {
		d := delta(c.name, c.labels)
		if d.value != c.value || d.count != c.count {
			t.Errorf("%s%v moved by %+v, want value %v count %v", c.name, c.labels, d, c.value, c.count)
		} else {
			t.Logf("%s%v: +%v (histogram: +%v observations, +%.3f s)", c.name, c.labels, d.value, d.count, d.sum)
		}
	}
	if s := delta("claimcheck_handler_duration_seconds", map[string]string{"claimcheck_kind": "pdf-info"}); s.sum <= 0 {
		t.Errorf("handler durations sum to %v s", s.sum)
	}

	// A forced payload-missing: its object deleted before it is worked.
	d := setup(t)
	if r := d.runWith(ctx, "submit", "--kind", "pdf-info", "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf")); r.code != 0 {
		t.Fatalf("submit: exit %d\n%s", r.code, r.stderr)
	}
	for _, p := range d.objects() {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if r := d.runWith(ctx, "work", "--kind", "pdf-info", "--until-empty"); r.code != 1 {
		t.Fatalf("work: exit %d, want 1 (a dead letter)\n%s", r.code, r.stderr)
	}
	before, after = after, scrape(t, srv.URL+"/metrics")
	missing := map[string]string{"claimcheck_kind": "pdf-info", "claimcheck_reason": claimcheck.ReasonPayloadMissing}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"claimcheck_job_dead_letters_total", missing},
		{"claimcheck_verify_failures_total", missing},
		{"claimcheck_job_attempts_total", map[string]string{"claimcheck_kind": "pdf-info", "claimcheck_outcome": "dead", "claimcheck_reason": claimcheck.ReasonPayloadMissing}},
	} {
		if v := delta(c.name, c.labels).value; v != 1 {
			t.Errorf("%s%v moved by %v, want 1", c.name, c.labels, v)
		} else {
			t.Logf("%s%v: +1", c.name, c.labels)
		}
	}
	if t.Failed() {
		var names []string
		for n := range after {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("families: %s", strings.Join(names, " "))
	}
}

// startWork runs claimcheck work in-process until the test ends, with
// --http on a free port, and returns the endpoints' base URL.
func (b *cliBundle) startWork(ctx context.Context, args ...string) (base string, stderr *testenv.Buffer) {
	b.t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	stderr = &testenv.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"--data", b.data}, append(args, "--http", "127.0.0.1:0")...), strings.NewReader(""), io.Discard, stderr)
	}()
	b.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.t.Error("work did not stop within a minute of its cancellation")
		}
	})
	const say = "metrics and health on http://"
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if line := lineWith(stderr.String(), say); line != "" {
			return "http://" + strings.Fields(strings.TrimPrefix(line, say))[0], stderr
		}
		select {
		case code := <-done:
			b.t.Fatalf("work exited %d before serving:\n%s", code, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("work did not serve within 2 minutes:\n%s", stderr.String())
		}
	}
}

// httpGet returns url's status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitStatus polls url until it answers want, for up to a minute.
func waitStatus(t *testing.T, url string, want int) string {
	t.Helper()
	var code int
	var body string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if code, body = httpGet(t, url); code == want {
			return body
		}
		<-time.After(200 * time.Millisecond)
	}
	t.Fatalf("%s: %d %q, want %d within a minute", url, code, body, want)
	return ""
}

// TestReadyzStoreOutage: work --http's /readyz answers 200 with every
// check passing, 503 naming the store while a proxy cuts the S3 server,
// and 200 again once it is back; /healthz answers 200 throughout.
func TestReadyzStoreOutage(t *testing.T) {
	t.Parallel()
	s3URL := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", `eval "$(scripts/seaweedfs.sh env)"`)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	store, proxy := proxiedStore(t, ownNamespace(t, s3URL, "readyz"+suffix), url.Values{"connect_timeout": {"2s"}, "stall_timeout": {"3s"}})
	b := setup(t)
	base, stderr := b.startWork(context.Background(), "--store", store, "work", "--kind", "pdf-info")
	body := waitStatus(t, base+"/readyz", http.StatusOK)
	if !strings.Contains(body, "ok database") || !strings.Contains(body, "ok store") {
		t.Fatalf("/readyz 200 without both checks: %q", body)
	}
	t.Logf("/readyz before the cut: 200\n%s", body)
	proxy.Cut()
	body = waitStatus(t, base+"/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "FAIL store") || !strings.Contains(body, "ok database") {
		t.Errorf("/readyz 503 does not name the store alone: %q", body)
	}
	if strings.Contains(body, "readyz"+suffix+"/") && strings.Contains(body, "payloads/") {
		t.Errorf("/readyz names a key: %q", body)
	}
	t.Logf("/readyz during the cut: 503\n%s", body)
	if code, _ := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz during the cut: %d, want 200", code)
	}
	proxy.Restore()
	body = waitStatus(t, base+"/readyz", http.StatusOK)
	t.Logf("/readyz after the cut: 200\n%s", body)
	if t.Failed() {
		t.Logf("work's stderr:\n%s", stderr.String())
	}
}

// TestJobLogLine: at --log-level info, each attempt is one structured log
// line with the job's id, kind, tenant, digest prefix, size, attempt,
// outcome, reason and durations: a success, a transient failure (retried)
// and a permanent one (payload-missing, dead on attempt 1). No line holds
// the payload's key or its bytes.
func TestJobLogLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const kind = "logline"
	ok := b.run("ok-payload-marker-1", "submit", "--json", "--kind", kind, "--tenant", "acme", "-")
	flaky := b.run("fail-payload-marker-2", "submit", "--json", "--kind", kind, "--tenant", "acme", "--max-attempts", "2", "-")
	gone := b.submit("--kind", kind, "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf"))
	if ok.code != 0 || flaky.code != 0 {
		t.Fatalf("submit: %+v %+v", ok, flaky)
	}
	key := b.payloadKey(gone.ID)
	for _, p := range b.objects() {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	r := b.run("", "--log-level", "info", "work", "--kind", kind, "--until-empty", "--exec", "--", "sh", "-c", "head -c 4 | grep -q fail && exit 1; echo done")
	if r.code != 1 {
		t.Fatalf("work: exit %d, want 1 (dead letters)\n%s", r.code, r.stderr)
	}
	var lines []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, `msg="job attempt"`) {
			lines = append(lines, l)
		}
	}
	for _, want := range []string{
		"outcome=completed reason=\"\"",
		"outcome=retrying reason=transient",
		"outcome=dead reason=transient",
		"outcome=dead reason=payload-missing",
	} {
		found := ""
		for _, l := range lines {
			if strings.Contains(l, want) {
				found = l
			}
		}
		if found == "" {
			t.Errorf("no job attempt line with %s among:\n%s", want, strings.Join(lines, "\n"))
			continue
		}
		for _, field := range []string{"job=", "kind=" + kind, "tenant=acme", "sha256=", "size=", "attempt=", "claim=", "verify=", "handler="} {
			if !strings.Contains(found, field) {
				t.Errorf("line lacks %s: %s", field, found)
			}
		}
		t.Logf("%s", found)
	}
	for _, secret := range []string{key, "payload-marker"} {
		if strings.Contains(r.stderr, secret) {
			t.Errorf("work's log holds %q:\n%s", secret, r.stderr)
		}
	}
}

// TestJobLogLineJSON: with --log-format json, each attempt is one JSON
// object on standard error (no other line about it): a success, a
// transient failure and a permanent one (exit 65), the handler's standard
// error kept with the failed attempt, quoted, its full digests shortened,
// and never written raw.
func TestJobLogLineJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const kind = "jsonline"
	for _, p := range []string{"okay-payload-marker", "fail-payload-marker", "dead-payload-marker"} {
		if r := b.run(p, "submit", "--json", "--kind", kind, "--tenant", "acme", "--max-attempts", "2", "-"); r.code != 0 {
			t.Fatalf("submit: %+v", r)
		}
	}
	digest := strings.Repeat("ab", 32)
	script := `p=$(head -c 4); echo "note from $p" >&2; case $p in fail) echo "try again later" >&2; exit 1;; dead) echo "bad input ` + digest + `" >&2; exit 65;; esac; echo done`
	r := b.run("", "--log-level", "info", "--log-format", "json", "work", "--kind", kind, "--until-empty", "--exec", "--", "sh", "-c", script)
	if r.code != 1 {
		t.Fatalf("work: exit %d, want 1 (dead letters)\n%s", r.code, r.stderr)
	}
	var attempts []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(l, "{") {
			if strings.Contains(l, "failed") || strings.Contains(l, "note from") || strings.Contains(l, "try again") {
				t.Errorf("a line besides the JSON ones: %s", l)
			}
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("not JSON: %s: %v", l, err)
			continue
		}
		if m["msg"] == "job attempt" {
			attempts = append(attempts, m)
			t.Logf("%s", l)
		}
	}
	want := map[string]string{"completed/": "", "retrying/transient": "try again later", "dead/transient": "try again later", "dead/handler-permanent": "bad input abababababab…"}
	seen := map[string]bool{}
	for _, m := range attempts {
		k := fmt.Sprint(m["outcome"], "/", m["reason"])
		tail, ok := want[k]
		if !ok {
			t.Errorf("unexpected attempt %s: %v", k, m)
			continue
		}
		seen[k] = true
		if e, _ := m["error"].(string); tail != "" && !strings.Contains(e, `stderr: "note from`) || !strings.Contains(fmt.Sprint(m["error"]), tail) {
			t.Errorf("attempt %s: error %q lacks the handler's stderr %q", k, m["error"], tail)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("no attempt line %s among %d", k, len(attempts))
		}
	}
	for _, secret := range []string{digest, "payload-marker"} {
		if strings.Contains(r.stderr, secret) {
			t.Errorf("work's log holds %q:\n%s", secret, r.stderr)
		}
	}
}

// TestMetricsSweep: the last sweep's orphans, found and removed, show as
// gauges on /metrics.
func TestMetricsSweep(t *testing.T) {
	t.Parallel()
	ctx, srv := metricsServer(t)
	b := setup(t)
	if r := b.runWith(ctx, "submit", "--kind", "pdf-info", "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf")); r.code != 0 {
		t.Fatalf("submit: exit %d\n%s", r.code, r.stderr)
	}
	stray := filepath.Join(b.data, "objects", claimcheck.PrefixPayloads, "acme", "stray-object")
	if err := os.WriteFile(stray, []byte("no job refers to this"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(stray, old, old); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dryRun         bool
		found, removed float64
	}{{true, 1, 0}, {false, 1, 1}} {
		args := []string{"sweep"}
		if c.dryRun {
			args = append(args, "--dry-run")
		}
		if r := b.runWith(ctx, args...); r.code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
		fams := scrape(t, srv.URL+"/metrics")
		labels := map[string]string{"claimcheck_dry_run": strconv.FormatBool(c.dryRun), "claimcheck_outcome": "ok"}
		found, removed := total(fams, "claimcheck_sweep_orphans_found", labels).value, total(fams, "claimcheck_sweep_orphans_removed", labels).value
		if found != c.found || removed != c.removed {
			t.Errorf("%v: orphans found %v removed %v, want %v and %v", args, found, removed, c.found, c.removed)
		} else {
			t.Logf("%v: claimcheck_sweep_orphans_found%v %v, claimcheck_sweep_orphans_removed %v", args, labels, found, removed)
		}
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("the orphan is still there after sweep: %v", err)
	}
}

// TestReadyzBroker: work --broker --http's /readyz checks the broker too:
// 503 naming it while a proxy cuts RabbitMQ, 200 again after.
func TestReadyzBroker(t *testing.T) {
	t.Parallel()
	u := brokers[0].url(t) // RabbitMQ, a queue of its own
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	proxy := outageproxy.New(t, parsed.Host)
	parsed.Host = proxy.Addr()
	b := setup(t)
	base, stderr := b.startWork(context.Background(), "--broker", parsed.String(), "work", "--kind", "pdf-info")
	body := waitStatus(t, base+"/readyz", http.StatusOK)
	if !strings.Contains(body, "ok broker") {
		t.Fatalf("/readyz 200 without the broker: %q", body)
	}
	t.Logf("/readyz before the cut: 200\n%s", body)
	proxy.Cut()
	body = waitStatus(t, base+"/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "FAIL broker") || strings.Contains(body, "guest:guest") {
		t.Errorf("/readyz 503 does not name the broker, or shows its password: %q", body)
	}
	t.Logf("/readyz during the cut: 503\n%s", body)
	proxy.Restore()
	body = waitStatus(t, base+"/readyz", http.StatusOK)
	t.Logf("/readyz after the cut: 200\n%s", body)
	if t.Failed() {
		t.Logf("work's stderr:\n%s", stderr.String())
	}
}

// metricsServer is a telemetry set of the test's own, in the returned
// context (commands run with it record there), and an HTTP server with its
// /metrics, /healthz and /readyz; both end with t.
func metricsServer(t *testing.T) (context.Context, *httptest.Server) {
	t.Helper()
	ctx := context.Background()
	tel, err := telemetry.New(ctx, telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	mux := http.NewServeMux()
	mountObservability(mux, tel, nil)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return telemetry.NewContext(ctx, tel), srv
}

package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/trace"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv/browsertest"
	"github.com/claimcheck/claimcheck/ops"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/pipeline/pipelinetest"
)

// truthMarker is in every payload of TestConsoleTellsTheWholeTruth; no
// page may show it.
const truthMarker = "TRUTH-PAYLOAD-MARKER"

// truth is the job database TestConsoleTellsTheWholeTruth fills: 210 dead
// letters (70 of kind refuse for tenant globex, 140 of kind reject for
// acme; every tenth offloaded), 40 invoices waiting (one enqueued under a
// trace), and a completed job with a result.
type truth struct {
	*bundle
	dead         []int64 // oldest first
	traced, done int64
	traceID      string
	secrets      []string
}

// TestConsoleTellsTheWholeTruth: on SQLite and PostgreSQL, with 210 dead
// letters and 40 jobs waiting, the overview counts exactly 210 and 40 and
// draws the last hour as SVG charts with a point per minute; the
// dead-letter page lists the newest first and pages, by its next and
// previous links, through all 210 and back; its filters (kind, tenant,
// reason, time) are applied and counted; a job's page shows its ticket's
// fields, its attempts with their reasons, its payload's and result's
// existence and its trace id; the Doctor page writes no probe on GET and
// probes on POST; no page's HTML holds a payload marker or a full key,
// digest, inline payload or signature. Chromium renders the pages and
// screenshots them.
func TestConsoleTellsTheWholeTruth(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(testing.TB) string{"sqlite": pipelinetest.SQLiteDatabase, "postgres": pipelinetest.PostgresDatabase} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testTruth(t, fillTruth(t, setupDB(t, db(t))))
		})
	}
}

func fillTruth(t *testing.T, b *bundle) *truth {
	ctx := t.Context()
	tr := &truth{bundle: b}
	payload := func(i int) []byte {
		if i%10 == 0 { // offloaded: over the 64 KiB inline threshold
			return bytes.Repeat([]byte(fmt.Sprintf("%s %d offloaded\n", truthMarker, i)), 5000)
		}
		return []byte(fmt.Sprintf("%s %d inline", truthMarker, i))
	}
	for i := range 210 {
		kind, tenant := "reject", "acme"
		if i%3 == 0 {
			kind, tenant = "refuse", "globex"
		}
		res, err := b.p.Enqueue(ctx, kind, tenant, bytes.NewReader(payload(i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		tr.dead = append(tr.dead, res.JobID)
	}
	fail := claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
		return nil, claimcheck.Permanent(errors.New("the test handler refuses every job"))
	})
	echo := claimcheck.HandlerFunc(func(_ context.Context, j *claimcheck.Job) (*claimcheck.Result, error) {
		return &claimcheck.Result{Body: strings.NewReader(truthMarker + " result")}, nil
	})
	res, err := b.p.Enqueue(ctx, "echo", "acme", bytes.NewReader(payload(0)), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.done = res.JobID
	wctx, cancel := context.WithTimeout(ctx, pipelinetest.WorkTimeout)
	defer cancel()
	if err := b.p.Work(wctx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{"reject": fail, "refuse": fail, "echo": echo}, UntilEmpty: true, Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xc0, 0x25, 0x01, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
		SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled, Remote: true})
	tr.traceID = sc.TraceID().String()
	for i := range 40 {
		ectx := ctx
		if i == 0 {
			ectx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
		res, err := b.p.Enqueue(ectx, "invoice", "acme", bytes.NewReader(payload(i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			tr.traced = res.JobID
		}
	}
	// Spread over the last hour, as a day's work would be: each dead
	// letter enqueued and dead id%60 minutes ago, each waiting invoice
	// enqueued id%40 minutes ago (backdated in the job table).
	shift := map[string]string{
		"postgres": `UPDATE river_job SET created_at = created_at - make_interval(mins => CAST(id %% %[1]d AS int)),
			finalized_at = finalized_at - make_interval(mins => CAST(id %% %[1]d AS int)) WHERE state = '%[2]s'`,
		"sqlite": `UPDATE river_job SET created_at = datetime(created_at, '-' || (id %% %[1]d) || ' minutes', 'subsec'),
			finalized_at = datetime(finalized_at, '-' || (id %% %[1]d) || ' minutes', 'subsec') WHERE state = '%[2]s'`,
	}[b.p.Dialect()]
	for state, period := range map[string]int{"cancelled": 60, "available": 40} {
		if _, err := b.p.DB().ExecContext(ctx, fmt.Sprintf(shift, period, state)); err != nil {
			t.Fatal(err)
		}
	}
	// What no page may show: the marker, and every ticket's key, digest,
	// inline payload (base64) and signature, of payloads and results.
	tr.secrets = []string{truthMarker, base64.StdEncoding.EncodeToString([]byte(truthMarker))[:16]}
	add := func(tk *claimcheck.Ticket) {
		if tk == nil {
			return
		}
		tr.secrets = append(tr.secrets, tk.SHA256, tk.SHA256[:16], tk.Sig)
		if tk.Key != "" {
			tr.secrets = append(tr.secrets, tk.Key, tk.Key[strings.LastIndexByte(tk.Key, '/')+1:])
		}
		if len(tk.Inline) > 0 {
			tr.secrets = append(tr.secrets, base64.StdEncoding.EncodeToString(tk.Inline)[:16])
		}
	}
	err = b.p.List(ctx, pipeline.ListOptions{}, func(j *pipeline.JobInfo) error { add(j.Ticket()); add(j.ResultTicket()); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.secrets) < 250*3 {
		t.Fatalf("only %d forbidden strings: the test reads the tickets wrong", len(tr.secrets))
	}
	return tr
}

// get serves GET path from this host and returns the page, checked for
// secrets.
func (tr *truth) get(t *testing.T, path string, want int) string {
	t.Helper()
	rec := tr.do("GET", path, "127.0.0.1:4000", "127.0.0.1:8080", nil, nil)
	body := rec.Body.String()
	if rec.Code != want {
		t.Fatalf("GET %s: %d, want %d: %s", path, rec.Code, want, body)
	}
	tr.noSecrets(t, path, body)
	return body
}

func (tr *truth) noSecrets(t *testing.T, what, page string) {
	t.Helper()
	for _, s := range tr.secrets {
		if s != "" && strings.Contains(page, s) {
			t.Errorf("%s shows %q, which no page may show", what, s)
		}
	}
}

var (
	deadRowRegexp = regexp.MustCompile(`<tr id="dead-(\d+)">`)
	nextRegexp    = regexp.MustCompile(`class="next" href="([^"]+)"`)
	prevRegexp    = regexp.MustCompile(`class="prev" href="([^"]+)"`)
	totalRegexp   = regexp.MustCompile(`<span id="total">(\d+)</span>`)
)

func ids(page string) []int64 {
	var out []int64
	for _, m := range deadRowRegexp.FindAllStringSubmatch(page, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, id)
	}
	return out
}

func link(re *regexp.Regexp, page string) string {
	if m := re.FindStringSubmatch(page); m != nil {
		return "/console/dead" + html.UnescapeString(m[1])
	}
	return ""
}

func total(t *testing.T, page string) int {
	t.Helper()
	m := totalRegexp.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no total on the page")
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func testTruth(t *testing.T, tr *truth) {
	newest, oldest := tr.dead[len(tr.dead)-1], tr.dead[0]

	// The overview: exact counts, and the last hour drawn.
	page := tr.get(t, "/console/", 200)
	for _, want := range []string{`id="dead-count">210<`, `id="available-count">40<`, `<svg id="chart-throughput"`, `<svg id="chart-depth"`,
		`depth: 40</title>`, "handler-permanent</a></td><td>210<", `id="kind-invoice"`, `<td class="ok">ok</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	if n := len(regexp.MustCompile(`<title>\d\d:\d\d dead: [1-9]`).FindAllString(page, -1)); n < 55 {
		t.Errorf("the throughput chart has dead letters in %d minutes, want them spread over the hour", n)
	}
	if n := strings.Count(page, `<circle class="point"`); n != 4*61 && n != 4*62 {
		t.Errorf("overview charts have %d points, want 61 or 62 a series (a point per minute of the last hour), 4 series", n)
	}

	// The dead-letter page: newest first, paged through all 210 and back.
	page = tr.get(t, "/console/dead", 200)
	if total(t, page) != 210 {
		t.Errorf("dead-letter page counts %d, want 210", total(t, page))
	}
	first := ids(page)
	if len(first) != 50 || first[0] != newest {
		t.Fatalf("first dead-letter page: %d rows starting at %v, want 50 starting at the newest, %d", len(first), first[:min(1, len(first))], newest)
	}
	if link(prevRegexp, page) != "" {
		t.Errorf("the first page links to a previous one")
	}
	seen := slices.Clone(first)
	var pages []string
	for next := link(nextRegexp, page); next != ""; next = link(nextRegexp, page) {
		if page = tr.get(t, next, 200); total(t, page) != 210 {
			t.Errorf("%s counts %d, want 210", next, total(t, page))
		}
		pages = append(pages, next)
		seen = append(seen, ids(page)...)
	}
	want := slices.Clone(tr.dead)
	slices.Reverse(want)
	if !slices.Equal(seen, want) {
		t.Errorf("paging listed %d dead letters (%v … %v), want all 210 newest first", len(seen), seen[:min(3, len(seen))], seen[max(0, len(seen)-3):])
	}
	if len(pages) != 4 || !slices.Contains(ids(page), oldest) {
		t.Errorf("paged %d times, last page %v, want 4 times to the oldest, %d", len(pages), ids(page), oldest)
	}
	back := 0
	for prev := link(prevRegexp, page); prev != ""; prev = link(prevRegexp, page) {
		page = tr.get(t, prev, 200)
		back++
	}
	if got := ids(page); back != 4 || !slices.Equal(got, first) {
		t.Errorf("paging back %d times ended at %v…, want 4 times to the first page", back, got[:min(3, len(got))])
	}
	// Oldest first, the newest is on the last page.
	page = tr.get(t, "/console/dead?order=oldest", 200)
	for next := link(nextRegexp, page); next != ""; next = link(nextRegexp, page) {
		page = tr.get(t, next, 200)
	}
	if got := ids(page); len(got) != 10 || got[len(got)-1] != newest {
		t.Errorf("oldest first, the last page is %v, want 10 rows ending at the newest, %d", got, newest)
	}

	// Filters, applied and counted. Of kind refuse (every third), those
	// dead under 15 minutes ago (id%60 minutes, see fillTruth):
	recentRefused := 0
	for i, id := range tr.dead {
		if i%3 == 0 && id%60 < 15 {
			recentRefused++
		}
	}
	for _, c := range []struct {
		query string
		n     int
		kind  string
	}{{"?kind=refuse", 70, "refuse"}, {"?tenant=globex", 70, "refuse"}, {"?kind=reject&tenant=acme", 140, "reject"}, {"?reason=handler-permanent", 210, ""},
		{"?reason=payload-missing", 0, ""}, {"?since=1h", 210, ""}, {"?kind=refuse&reason=handler-permanent&since=15m", recentRefused, "refuse"}} {
		page := tr.get(t, "/console/dead"+c.query, 200)
		if got := total(t, page); got != c.n {
			t.Errorf("dead%s counts %d, want %d", c.query, got, c.n)
		}
		if rows := ids(page); len(rows) != min(c.n, 50) {
			t.Errorf("dead%s shows %d rows, want %d", c.query, len(rows), min(c.n, 50))
		}
		if c.kind != "" && strings.Count(page, "<td>"+c.kind+"</td>") != min(c.n, 50) {
			t.Errorf("dead%s shows rows of another kind", c.query)
		}
	}
	for _, q := range []string{"?kind=Nope!", "?tenant=../x", "?reason=%3Cscript%3E", "?since=forever"} {
		tr.get(t, "/console/dead"+q, 400)
	}
	if page := tr.get(t, "/console/jobs?state=available", 200); total(t, page) != 40 || strings.Count(page, `<tr id="job-`) != 40 {
		t.Errorf("jobs?state=available: %d counted, %d rows, want 40 and 40", total(t, page), strings.Count(page, `<tr id="job-`))
	}
	if page := tr.get(t, "/console/jobs?kind=invoice&tenant=acme", 200); total(t, page) != 40 {
		t.Errorf("jobs?kind=invoice: %d counted, want 40", total(t, page))
	}
	if page := tr.get(t, "/console/jobs", 200); total(t, page) != 251 || !strings.Contains(page, fmt.Sprintf(`<a href="/console/jobs/%d">`, newest)) {
		t.Errorf("jobs page: %d counted, want 251, with rows linking to their job's page", total(t, page))
	}

	// A job's page.
	offloadedDead := tr.dead[0] // i = 0: offloaded
	page = tr.get(t, fmt.Sprintf("/console/jobs/%d", offloadedDead), 200)
	for _, want := range []string{"globex", "offloaded", `<td class="reason">handler-permanent</td>`, "the test handler refuses every job", `id="payload-status" class="ok">exists<`, "payloads/globex/…", "(prefix only)", "none recorded", "No result recorded."} {
		if !strings.Contains(page, want) {
			t.Errorf("dead job's page lacks %q", want)
		}
	}
	page = tr.get(t, fmt.Sprintf("/console/jobs/%d", tr.done), 200)
	if !strings.Contains(page, `id="result-status" class="ok">inline (in the ticket)<`) && !strings.Contains(page, `id="result-status" class="ok">exists<`) {
		t.Errorf("completed job's page does not say its result exists")
	}
	page = tr.get(t, fmt.Sprintf("/console/jobs/%d", tr.traced), 200)
	if !strings.Contains(page, "<code>"+tr.traceID+"</code>") {
		t.Errorf("the traced job's page does not show trace id %s", tr.traceID)
	}
	tr.get(t, "/console/jobs/99999999", 404)

	// The Doctor page reads on GET, probes on a same-origin POST.
	page = tr.get(t, "/console/doctor", 200)
	if !strings.Contains(page, "without its probes") || strings.Contains(page, "wrote") || tr.probed(t) {
		t.Errorf("GET /console/doctor probed the store")
	}
	rec := tr.do("POST", "/console/doctor", "127.0.0.1:4000", "127.0.0.1:8080", map[string][]string{"Sec-Fetch-Site": {"same-origin"}}, nil)
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, "probes included") || !strings.Contains(body, "wrote") {
		t.Errorf("POST /console/doctor: %d, want the probes run", rec.Code)
	}
	rec = tr.do("POST", "/console/doctor", "127.0.0.1:4000", "127.0.0.1:8080", map[string][]string{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"http://attacker.example"}}, nil)
	if rec.Code != 403 {
		t.Errorf("cross-site POST /console/doctor: %d, want 403", rec.Code)
	}

	tr.screenshots(t, newest, offloadedDead)
}

// probed reports whether the store holds any trace of a doctor probe (a
// path under its reserved tenant).
func (tr *truth) probed(t *testing.T) bool {
	t.Helper()
	found := false
	_ = filepath.WalkDir(tr.bucket, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(path, ops.DoctorTenant) {
			found = true
		}
		return nil
	})
	return found
}

// serve serves the console on a loopback port until t ends, and returns
// its base URL.
func (tr *truth) serve(t *testing.T) string {
	srv := httptest.NewServer(tr.mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// screenshots renders the overview, the first and last dead-letter pages,
// a job's page and the Doctor page in Chromium and saves them.
func (tr *truth) screenshots(t *testing.T, newest, job int64) {
	ctx := browsertest.NewBrowser(t)
	shots := browsertest.ScreenshotDir(t)
	srv := tr.serve(t)
	html := browsertest.Visit(t, ctx, shots, "01-overview", srv+"/console/", chromedp.WaitVisible(chromedp.CSS("#chart-depth")))
	tr.noSecrets(t, "overview in Chromium", html)
	html = browsertest.Visit(t, ctx, shots, "02-dead-newest", srv+"/console/dead", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#dead-%d", newest))))
	tr.noSecrets(t, "dead-letter page in Chromium", html)
	for i := range 4 { // each next page's first row is the 50th older one
		first := tr.dead[len(tr.dead)-1-50*(i+1)]
		html = browsertest.Do(t, ctx, shots, fmt.Sprintf("03-dead-page-%d", i+2), chromedp.Click(chromedp.CSS("a.next")), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#dead-%d", first))))
	}
	if got := ids(html); len(got) != 10 {
		t.Errorf("in Chromium, the fifth dead-letter page shows %d rows, want 10", len(got))
	}
	html = browsertest.Visit(t, ctx, shots, "04-dead-filtered", srv+"/console/dead?kind=refuse&since=1h", chromedp.WaitVisible(chromedp.CSS("#dead")))
	tr.noSecrets(t, "filtered dead-letter page in Chromium", html)
	html = browsertest.Visit(t, ctx, shots, "05-job", fmt.Sprintf("%s/console/jobs/%d", srv, job), chromedp.WaitVisible(chromedp.CSS("#attempts")))
	tr.noSecrets(t, "job page in Chromium", html)
	html = browsertest.Visit(t, ctx, shots, "06-doctor", srv+"/console/doctor", chromedp.WaitVisible(chromedp.CSS("#checks")))
	tr.noSecrets(t, "doctor page in Chromium", html)
	html = browsertest.Do(t, ctx, shots, "07-doctor-probed", chromedp.Click(chromedp.CSS("#probe")), chromedp.WaitVisible(chromedp.CSS("#probed")))
	tr.noSecrets(t, "probed doctor page in Chromium", html)
	t.Logf("screenshots in %s", shots)
}

// FuzzParseFilter: whatever the query, parseFilter never panics, and a
// filter it accepts survives its own links: the query a next or previous
// link carries parses back to the same filter.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"kind=refuse&tenant=acme&since=1h", "state=dead&order=oldest", "reason=handler-permanent", "kind=Nope!", "since=forever", "after=12&before=3", "tenant=%2e%2e"} {
		f.Add(s, false)
	}
	c := &Console{o: Options{Now: time.Now, RowLimit: 50}}
	f.Fuzz(func(t *testing.T, raw string, dead bool) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		flt, _, bad := c.parseFilter(q, dead)
		if bad != "" {
			return
		}
		back, err := url.ParseQuery(strings.TrimPrefix(flt.query(dead, "after", 7), "?"))
		if err != nil {
			t.Fatalf("link query %q: %v", flt.query(dead, "after", 7), err)
		}
		again, _, bad := c.parseFilter(back, dead)
		if bad != "" || again != flt || back.Get("after") != "7" {
			t.Fatalf("filter %+v became %+v (%q) through its link", flt, again, bad)
		}
	})
}

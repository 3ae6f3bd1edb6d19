package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/claimcheck/claimcheck/internal/testenv"
)

// serveConsole starts serve in-process on addr (host:port) and returns
// the console's base URL (http://host:port) as serve printed it. serve is
// stopped, and must exit 0, when t ends.
func (b *cliBundle) serveConsole(addr string, args ...string) string {
	t := b.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var serveErr bytes.Buffer
	go func() {
		done <- Run(ctx, append([]string{"--data", b.data}, append(args, "serve", "--addr", addr)...), strings.NewReader(""), pw, &serveErr)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, serveErr.String())
		}
	})
	br := bufio.NewReader(pr)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			cancel()
			<-done
			t.Fatalf("serve: %v (%s)", err, serveErr.String())
		}
		if _, rest, ok := strings.Cut(line, "web console on "); ok {
			go io.Copy(io.Discard, br)
			base, _, _ := strings.Cut(rest, " ")
			return strings.TrimSuffix(base, "/")
		}
	}
}

// forbidden is what no page of the console may contain: the payload
// marker and, read from the job table itself, every ticket's full key,
// full digest, inline payload (base64) and wrapped data key, for payloads
// and results.
func forbidden(t *testing.T, b *cliBundle, marker string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(b.data, "claimcheck.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT json(args), json(metadata) FROM river_job`) // River keeps them as JSONB
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	secrets := []string{marker}
	addTicket := func(raw json.RawMessage) {
		var tk map[string]any
		if json.Unmarshal(raw, &tk) != nil {
			return
		}
		for _, f := range []string{"key", "sha256", "inline", "dek", "sig"} {
			s, _ := tk[f].(string)
			if f == "key" && len(s) > 0 { // and the part after the tenant's prefix, which pages cut
				secrets = append(secrets, s)
				s = s[strings.LastIndexByte(s, '/')+1:]
			}
			if len(s) >= 16 {
				secrets = append(secrets, s, s[:16])
			}
		}
	}
	for rows.Next() {
		var args, md []byte
		if err := rows.Scan(&args, &md); err != nil {
			t.Fatal(err)
		}
		var a struct {
			Ticket json.RawMessage `json:"ticket"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			t.Fatal(err)
		}
		addTicket(a.Ticket)
		var m struct {
			Output struct {
				Result json.RawMessage `json:"result"`
			} `json:"output"`
		}
		if json.Unmarshal(md, &m) == nil && m.Output.Result != nil {
			addTicket(m.Output.Result)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(secrets) < 10 {
		t.Fatalf("only %d forbidden strings found in the job table: the test reads it wrong", len(secrets))
	}
	return secrets
}

// noSecrets fails t if page (what) holds any of secrets.
func noSecrets(t *testing.T, what, page string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(page, s) {
			t.Errorf("%s shows %q, which no page may show", what, s)
		}
	}
}

// The browser helpers, shared with the console package's tests.
var (
	screenshotDir = testenv.ScreenshotDir
	newBrowser    = testenv.NewBrowser
	visit         = testenv.Visit
	do            = testenv.Do
	textIncludes  = testenv.TextIncludes
	text          = testenv.Text
)

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConsoleBrowser drives the web console that serve mounts in headless
// Chromium: every page loads; the dead-letter page lists dead jobs with
// their reason and whether their payload is still there; its replay button
// replays one and refuses the one whose payload is gone, with the words of
// `claimcheck dead replay`; River UI's page and a job's page in it load;
// and no page's HTML (nor River UI's API answers) holds the payload marker
// or any ticket's key, digest, inline payload or wrapped key.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	shots := screenshotDir(t)
	b := setup(t)
	dir := t.TempDir()
	marker := "CCMARKER" + strings.ToUpper(hex.EncodeToString([]byte(rand.Text()[:8])))
	big := func(name string) string { // offloaded: over the 64 KiB inline threshold
		return writeFile(t, filepath.Join(dir, name), strings.Repeat(marker+" "+name+" offloaded payload line\n", 4000))
	}
	kept := b.submit("--kind", "reject", "--tenant", "acme", big("kept.txt"))
	gone := b.submit("--kind", "reject", "--tenant", "acme", big("gone.txt"))
	inline := b.submit("--kind", "reject", "--tenant", "acme", writeFile(t, filepath.Join(dir, "inline.txt"), marker+" small inline payload"))
	done := b.submit("--kind", "echo", "--tenant", "globex", big("done.txt"))
	b.dead("work", "--kind", "reject", "--until-empty", "--exec", "--", "sh", "-c", "cat >/dev/null; echo the test handler rejects every job >&2; exit 65")
	b.ok("work", "--kind", "echo", "--until-empty", "--exec", "--", "cat")
	if err := os.Remove(filepath.Join(b.data, "objects", filepath.FromSlash(b.payloadKey(gone.ID)))); err != nil {
		t.Fatal(err)
	}
	secrets := forbidden(t, b, marker)
	base := b.serveConsole("127.0.0.1:0")

	html := visit(t, ctx, shots, "01-overview", base+"/", chromedp.WaitVisible(chromedp.CSS("#dead-count")))
	noSecrets(t, "overview", html, secrets)
	if !strings.Contains(html, `id="dead-count">3<`) {
		t.Errorf("overview does not count 3 dead letters")
	}
	for _, want := range []string{"<td>database</td><td class=\"ok\">ok</td>", "<td>store</td><td class=\"ok\">ok</td>", `<svg id="chart-throughput"`, `<svg id="chart-depth"`} {
		if !strings.Contains(html, want) {
			t.Errorf("overview lacks %q (serve's readiness checks, the last hour's charts)", want)
		}
	}

	html = visit(t, ctx, shots, "02-jobs", base+"/console/jobs", chromedp.WaitVisible(chromedp.CSS("#jobs")))
	noSecrets(t, "jobs page", html, secrets)
	for _, want := range []string{fmt.Sprintf(`id="job-%d"`, done.ID), "over the inline threshold", "within the inline threshold", "payloads/acme/…", "completed", "handler-permanent"} {
		if !strings.Contains(html, want) {
			t.Errorf("jobs page lacks %q", want)
		}
	}

	// A job row links to the job's page: its result still exists.
	html = do(t, ctx, shots, "02b-job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[href="/console/jobs/%d"]`, done.ID))), chromedp.WaitVisible(chromedp.CSS("#result-status")))
	noSecrets(t, "job page", html, secrets)
	for _, want := range []string{`id="result-status" class="ok">exists<`, `id="payload-status" class="ok">exists<`, "payloads/globex/…", "No failed attempt recorded."} {
		if !strings.Contains(html, want) {
			t.Errorf("job %d's page lacks %q", done.ID, want)
		}
	}

	html = visit(t, ctx, shots, "03-dead", base+"/console/dead", chromedp.WaitVisible(chromedp.CSS("#dead")))
	noSecrets(t, "dead-letter page", html, secrets)
	rowKept := text(t, ctx, fmt.Sprintf("#dead-%d", kept.ID))
	rowGone := text(t, ctx, fmt.Sprintf("#dead-%d", gone.ID))
	rowInline := text(t, ctx, fmt.Sprintf("#dead-%d", inline.ID))
	for _, r := range []struct{ row, payload string }{{rowKept, "exists"}, {rowGone, "gone (expired or deleted)"}, {rowInline, "inline (in the ticket)"}} {
		if !strings.Contains(r.row, "handler-permanent") || !strings.Contains(r.row, "the test handler rejects every job") || !strings.Contains(r.row, r.payload) {
			t.Errorf("dead-letter row %q: want reason handler-permanent, the handler's words and payload %q", r.row, r.payload)
		}
	}

	html = do(t, ctx, shots, "04-dead-replayed", chromedp.Click(chromedp.CSS(fmt.Sprintf("#replay-%d", kept.ID))), chromedp.WaitVisible(chromedp.CSS("#notice")))
	if want := fmt.Sprintf("job %d replayed", kept.ID); !strings.Contains(html, want) {
		t.Errorf("after its replay button the page does not say %q", want)
	}
	if strings.Contains(html, fmt.Sprintf(`id="dead-%d"`, kept.ID)) {
		t.Errorf("replayed job %d is still listed as dead", kept.ID)
	}
	html = do(t, ctx, shots, "05-dead-refused", chromedp.Click(chromedp.CSS(fmt.Sprintf("#replay-%d", gone.ID))), chromedp.WaitVisible(chromedp.CSS("#error")))
	if want := fmt.Sprintf("job %d refused: payload expired or deleted: nothing to replay", gone.ID); !strings.Contains(html, want) {
		t.Errorf("replay of the job whose payload is gone does not say %q", want)
	}
	states := map[int64]string{}
	for _, j := range b.jobs() {
		states[j.ID] = j.State
	}
	if states[kept.ID] != "available" || states[gone.ID] != "cancelled" {
		t.Errorf("after the replay buttons: job %d %s (want available), job %d %s (want cancelled)", kept.ID, states[kept.ID], gone.ID, states[gone.ID])
	}

	html = visit(t, ctx, shots, "06-outbox", base+"/console/outbox", chromedp.WaitVisible(chromedp.CSS("#outbox")))
	noSecrets(t, "outbox page", html, secrets)
	html = visit(t, ctx, shots, "07-storage", base+"/console/storage", chromedp.WaitVisible(chromedp.CSS("#storage")))
	noSecrets(t, "storage page", html, secrets)
	for _, want := range []string{"acme", "globex", "result"} {
		if !strings.Contains(html, want) {
			t.Errorf("storage page lacks %q", want)
		}
	}
	html = visit(t, ctx, shots, "08-doctor", base+"/console/doctor", chromedp.WaitVisible(chromedp.CSS("#checks")))
	noSecrets(t, "doctor page", html, secrets)
	for _, want := range []string{"retention", "expiry payloads/", "deployment key", "PASS", "without its probes"} {
		if !strings.Contains(html, want) {
			t.Errorf("doctor page lacks %q", want)
		}
	}
	// Its probes run only when asked, by the page's own (same-origin) form.
	html = do(t, ctx, shots, "08b-doctor-probed", chromedp.Click(chromedp.CSS("#probe")), chromedp.WaitVisible(chromedp.CSS("#probed")))
	noSecrets(t, "probed doctor page", html, secrets)
	if !strings.Contains(html, "wrote") {
		t.Errorf("the probed doctor page does not say it wrote its probes")
	}

	// River UI: its own page, then the page of a completed job (its
	// arguments and recorded output are where tickets live).
	html = visit(t, ctx, shots, "09-riverui", base+"/riverui/", textIncludes("Completed"))
	noSecrets(t, "River UI", html, secrets)
	// The page shows the arguments with the ticket folded; River UI renders
	// what its API answered, which is checked whole below.
	html = visit(t, ctx, shots, "10-riverui-job", fmt.Sprintf("%s/riverui/jobs/%d", base, done.ID), textIncludes(`"ticket"`), textIncludes(`"output"`))
	noSecrets(t, "River UI's job page", html, secrets)
	for _, path := range []string{"/riverui/api/jobs?state=completed", "/riverui/api/jobs?state=cancelled", "/riverui/api/jobs?state=available", "/riverui/api/jobs/" + strconv.FormatInt(done.ID, 10), "/riverui/api/jobs/" + strconv.FormatInt(inline.ID, 10)} {
		code, body := get(t, base+path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
		noSecrets(t, "River UI's API "+path, string(body), secrets)
	}
	// River UI's retry is the same replay: it refuses the payload-gone job.
	code, body := post(t, base+"/riverui/api/jobs/retry", fmt.Sprintf(`{"ids":["%d"]}`, gone.ID), nil)
	if code != http.StatusConflict || !strings.Contains(string(body), "payload expired or deleted: nothing to replay") {
		t.Errorf("River UI retry of job %d: %d %s, want 409 naming the missing payload", gone.ID, code, body)
	}
	// A cross-site form post is refused; so is a page of another site
	// whose name resolves to 127.0.0.1 (DNS rebinding).
	code, body = post(t, fmt.Sprintf("%s/console/dead/%d/replay", base, inline.ID), "", http.Header{"Origin": {"http://attacker.example"}, "Sec-Fetch-Site": {"cross-site"}})
	if code != http.StatusForbidden {
		t.Errorf("cross-site replay: %d %s, want 403", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/console/dead", nil)
	req.Host = "attacker.example"
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("request naming host attacker.example from 127.0.0.1: %d, want 401", resp.StatusCode)
		}
	}
}

// post sends body (JSON when it is not empty) and returns the status and
// the answer.
func post(t *testing.T, url, body string, h http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// envNetnsChild marks the run of TestConsoleRefusesOtherHosts inside the
// network namespace it makes.
const envNetnsChild = "CLAIMCHECK_TEST_NETNS_CHILD"

// otherHost is the second address of the network namespace's only
// interface, lo: an address that is not a loopback address (TEST-NET-1,
// RFC 5737), on a device from which nothing leaves the namespace.
const otherHost = "192.0.2.1"

// TestConsoleRefusesOtherHosts: a request from an address that is not
// loopback gets no page and no River UI answer without a token. A real one
// is needed: the test runs itself again inside a network namespace of its
// own (unshare --net) where lo also has 192.0.2.1 and serve listens on
// every address; a client bound to 192.0.2.1 is refused, one on 127.0.0.1
// served. What makes a peer local is its address, not the device it came
// through. (A second loopback address such as 127.0.0.2 would not do: all
// of 127.0.0.0/8 is loopback.)
func TestConsoleRefusesOtherHosts(t *testing.T) {
	if os.Getenv(envNetnsChild) != "1" {
		t.Parallel()
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			testenv.Require(t, "CLAIMCHECK_TEST_UNSHARE", "install util-linux and iproute2 (unshare, ip) and run as root")
		}
		cmd := exec.Command(unshare, "--net", "sh", "-ec",
			`ip link set lo up; ip addr add `+otherHost+`/32 dev lo; exec "$@"`,
			"sh", os.Args[0], "-test.run=^TestConsoleRefusesOtherHosts$", "-test.v", "-test.count=1", "-test.timeout=10m")
		cmd.Env = append(os.Environ(), envNetnsChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil && bytes.Contains(out, []byte("unshare failed")) {
			testenv.Require(t, "CLAIMCHECK_TEST_UNSHARE", "this test makes a network namespace: run it as root (unshare --net: "+strings.TrimSpace(string(out))+")")
		}
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestConsoleRefusesOtherHosts")) {
			t.Fatalf("in a network namespace: %v\n%s", err, out)
		}
		t.Logf("in a network namespace:\n%s", out)
		return
	}
	b := setup(t)
	b.submit("--kind", "echo", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
	base := b.serveConsole("0.0.0.0:0")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	from := func(local string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 30 * time.Second}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	do := func(c *http.Client, url string, h http.Header) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	local, other := from("127.0.0.1"), from(otherHost)
	if code, body := do(local, "http://127.0.0.1:"+port+"/console/dead", nil); code != http.StatusOK {
		t.Errorf("from 127.0.0.1: %d %s", code, body)
	}
	for _, path := range []string{"/", "/console/dead", "/console/jobs", "/riverui/", "/riverui/api/jobs?state=available"} {
		code, body := do(other, "http://"+otherHost+":"+port+path, nil)
		if code != http.StatusUnauthorized || !strings.Contains(body, "token") {
			t.Errorf("GET %s from %s without a token: %d %s, want 401 asking for a token", path, otherHost, code, body)
		}
		code, body = do(other, "http://"+otherHost+":"+port+path, http.Header{"Authorization": {"Bearer not-a-token"}})
		if code != http.StatusForbidden {
			t.Errorf("GET %s from %s with a wrong token: %d %s, want 403", path, otherHost, code, body)
		}
	}
	code, body := do(other, "http://"+otherHost+":"+port+"/console/login", nil)
	if code != http.StatusOK || !strings.Contains(body, `name="token"`) {
		t.Errorf("login page from %s: %d %s", otherHost, code, body)
	}

	// The HTTP API: without tokens, this host only; with them, a bearer
	// token for the job's tenant. The console takes only an all-tenants
	// token.
	if code, body := do(other, "http://"+otherHost+":"+port+"/v1/jobs/1", nil); code != http.StatusUnauthorized {
		t.Errorf("API from %s without tokens: %d %s, want 401", otherHost, code, body)
	}
	if code, body := do(local, "http://127.0.0.1:"+port+"/v1/jobs/1", nil); code != http.StatusOK {
		t.Errorf("API from 127.0.0.1 without tokens: %d %s, want 200", code, body)
	}
	acme := strings.TrimSpace(b.ok("tokens", "create", "--tenant", "acme"))
	globex := strings.TrimSpace(b.ok("tokens", "create", "--tenant", "globex"))
	all := strings.TrimSpace(b.ok("tokens", "create", "--all-tenants"))
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	for _, c := range []struct {
		client *http.Client
		url    string
		h      http.Header
		want   int
	}{
		{other, "http://" + otherHost + ":" + port + "/v1/jobs/1", bearer(acme), http.StatusOK},
		// Another tenant's job is answered as missing (docs/http-api.md).
		{other, "http://" + otherHost + ":" + port + "/v1/jobs/1", bearer(globex), http.StatusNotFound},
		{local, "http://127.0.0.1:" + port + "/v1/jobs/1", nil, http.StatusUnauthorized},
		{other, "http://" + otherHost + ":" + port + "/console/jobs", bearer(acme), http.StatusForbidden},
		{other, "http://" + otherHost + ":" + port + "/console/jobs", bearer(all), http.StatusOK},
	} {
		if code, body := do(c.client, c.url, c.h); code != c.want {
			t.Errorf("GET %s: %d %s, want %d", c.url, code, body, c.want)
		}
	}
}

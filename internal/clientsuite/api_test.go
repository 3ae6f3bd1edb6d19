package clientsuite_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// corpus is a document of testdata/pdf with its SHA-256 (hex) and size.
type corpus struct {
	path, sha256 string
	size         int64
}

// corpusPDFs returns testdata/pdf/*.pdf (big.pdf too when it has been
// made), each hashed here, independently of the clients.
func corpusPDFs(t *testing.T) []corpus {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(moduleRoot, "testdata", "pdf", "*.pdf"))
	if err != nil || len(paths) < 5 {
		t.Fatalf("testdata/pdf holds %d PDFs (%v), want the 5 of the corpus", len(paths), err)
	}
	var docs []corpus
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		abs, _ := filepath.Abs(p)
		docs = append(docs, corpus{abs, hex.EncodeToString(sum[:]), int64(len(b))})
	}
	return docs
}

// apiDeployment is a deployment with serve running and tokens for two
// tenants: every request of the tests carries one (with tokens in the job
// database, serve refuses requests without).
type apiDeployment struct {
	*deployment
	url    string
	tokens map[string]string // tenant → token
}

func startAPI(t *testing.T, db func(testing.TB) string) *apiDeployment {
	t.Helper()
	d := newDeployment(t, db)
	a := &apiDeployment{deployment: d, tokens: map[string]string{}}
	for _, tenant := range []string{"acme", "globex"} {
		a.tokens[tenant] = strings.TrimSpace(d.claimcheck("", "tokens", "create", "--tenant", tenant, "--name", "clients-test-"+tenant))
		if a.tokens[tenant] == "" {
			t.Fatalf("tokens create --tenant %s printed no token", tenant)
		}
	}
	a.url = d.serve()
	return a
}

// as returns the environment of a client acting with tenant's token.
func (a *apiDeployment) as(tenant string) []string {
	return []string{"CLAIMCHECK_API_TOKEN=" + a.tokens[tenant], "CLAIMCHECK_API_TENANT=" + tenant}
}

// example runs the client's example program as tenant and returns the
// JSON objects it printed; a non-zero exit fails the test.
func (a *apiDeployment) example(t *testing.T, c *client, tenant string, args ...string) []map[string]any {
	t.Helper()
	stdout, stderr, err := c.exec(t, a.url, a.as(tenant), append([]string{c.example}, args...)...)
	if err != nil {
		t.Fatalf("%s %s %s: %v\nstdout:\n%s\nstderr:\n%s", c.name, c.example, strings.Join(args, " "), err, stdout, stderr)
	}
	return parseLines(t, c, stdout, stderr)
}

// refused runs the example program as tenant and returns the error it
// printed ({"error": {...}}); it must exit 1 with exactly that line.
func (a *apiDeployment) refused(t *testing.T, c *client, tenant string, args ...string) map[string]any {
	t.Helper()
	stdout, stderr, err := c.exec(t, a.url, a.as(tenant), append([]string{c.example}, args...)...)
	if err == nil {
		t.Fatalf("%s %s %s succeeded, want it refused:\n%s", c.name, c.example, strings.Join(args, " "), stdout)
	}
	lines := parseLines(t, c, stdout, stderr)
	if len(lines) == 0 || lines[len(lines)-1]["error"] == nil {
		t.Fatalf("%s %s %s: %v, printed no error:\nstdout:\n%s\nstderr:\n%s", c.name, c.example, strings.Join(args, " "), err, stdout, stderr)
	}
	return lines[len(lines)-1]["error"].(map[string]any)
}

func parseLines(t *testing.T, c *client, stdout, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		m, err := decodeObject(line)
		if err != nil {
			t.Fatalf("%s printed a line that is not a JSON object: %q\nstderr:\n%s", c.name, line, stderr)
		}
		out = append(out, m)
	}
	return out
}

// TestClientsAPI runs the Python, JavaScript and PHP clients against a real
// `claimcheck serve` (in-process, tokens for tenants acme and globex, a
// file store) on each job database:
//
//   - each client's own test suite (tests/test_api.py, test/api.test.js,
//     tests/api_test.php);
//   - the corpus PDFs submitted by one client's example program and worked
//     by the other's through the worker endpoints, its handler making a
//     JSON summary of the verified payload (SHA-256, size, first bytes) the
//     result; every result fetched and matched against the file, both
//     ways between Python and JavaScript (issue 17, must-show 2) and
//     between PHP and each of them (issue 28, must-show 2);
//   - a client-side digest mismatch refused (422 digest-mismatch), leaving
//     no job and no stored object;
//   - acme's token refused (403) on globex for submit and claim, and
//     answered 404 for globex's job and result, as for a missing job.
func TestClientsAPI(t *testing.T) {
	py, js, php := pythonClient(), jsClient(), phpClient()
	clients := []*client{py, js, php}
	docs := corpusPDFs(t)
	for name, db := range databases() {
		t.Run(name, func(t *testing.T) {
			a := startAPI(t, db)
			t.Run("Suites", func(t *testing.T) {
				// In parallel: each test waits a third of a lease for its
				// extension; they use job kinds of their own.
				t.Run("Python", func(t *testing.T) {
					t.Parallel()
					need(t, py)
					pyUnittestEnv(t, py, a.url, a.as("acme"), "tests.test_api")
				})
				t.Run("JavaScript", func(t *testing.T) {
					t.Parallel()
					need(t, js)
					nodeTestEnv(t, js, a.url, a.as("acme"), "test/api.test.js")
				})
				t.Run("PHP", func(t *testing.T) {
					t.Parallel()
					need(t, php)
					phpTestEnv(t, php, a.url, a.as("acme"), "tests/api_test.php")
				})
			})
			for _, pair := range [][2]*client{{py, js}, {js, py}, {php, py}, {py, php}, {php, js}, {js, php}} {
				producer, worker := pair[0], pair[1]
				t.Run("Exchange/"+producer.name+"-to-"+worker.name, func(t *testing.T) {
					need(t, producer)
					need(t, worker)
					exchange(t, a, producer, worker, docs)
				})
			}
			for _, c := range clients {
				t.Run("DigestMismatch/"+c.name, func(t *testing.T) {
					need(t, c)
					digestMismatch(t, a, c, docs[0])
				})
			}
			for _, c := range clients {
				t.Run("Readme/"+c.name, func(t *testing.T) {
					need(t, c)
					readme(t, a, c, docs[0].path)
				})
			}
			for _, c := range clients {
				t.Run("OtherTenant/"+c.name, func(t *testing.T) {
					need(t, c)
					otherTenant(t, a, c, docs[0])
				})
			}
		})
	}
}

// exchange: producer submits every document as acme, worker works them
// (its own handler: a JSON summary of the payload) until none is left, and
// producer fetches each result; each must describe its document exactly
// and be the work of worker, on attempt 1.
func exchange(t *testing.T, a *apiDeployment, producer, worker *client, docs []corpus) {
	kind := "summary-" + producer.name + "-to-" + worker.name
	args := []string{"submit", "--kind", kind, "--tenant", "acme"}
	for _, d := range docs {
		args = append(args, d.path)
	}
	submitted := a.example(t, producer, "acme", args...)
	if len(submitted) != len(docs) {
		t.Fatalf("%s submitted %d jobs, want %d: %v", producer.name, len(submitted), len(docs), submitted)
	}
	jobOf := map[string]int64{}
	for i, s := range submitted {
		d := docs[i]
		if s["file"] != d.path || s["sha256"] != d.sha256 || int64(s["size"].(float64)) != d.size || s["duplicate"] != false {
			t.Fatalf("%s's submit of %s printed %v, want sha256 %s size %d", producer.name, filepath.Base(d.path), s, d.sha256, d.size)
		}
		jobOf[d.path] = int64(s["job"].(float64))
	}

	// Until every job was handled, or 30 s passed without one.
	worked := a.example(t, worker, "acme", "work", "--kind", kind, "--max-jobs", fmt.Sprint(len(docs)), "--until-empty", "--wait", "30")
	var ids []int64
	for _, w := range worked {
		if w["state"] != "completed" || w["attempt"].(float64) != 1 {
			t.Errorf("%s worked job %v to %v", worker.name, w["job"], w)
		}
		ids = append(ids, int64(w["job"].(float64)))
	}
	slices.Sort(ids)
	var want []int64
	for _, id := range jobOf {
		want = append(want, id)
	}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("%s worked jobs %v, want each of %v once", worker.name, ids, want)
	}

	dir := t.TempDir()
	for _, d := range docs {
		id := jobOf[d.path]
		out := filepath.Join(dir, fmt.Sprintf("result-%d.json", id))
		got := a.example(t, producer, "acme", "result", fmt.Sprint(id), out)
		if len(got) != 1 {
			t.Fatalf("result %d printed %v", id, got)
		}
		r := got[0]
		summary, _ := r["result"].(map[string]any)
		if r["state"] != "completed" || summary == nil {
			t.Fatalf("%s's result of job %d (%s): %v", producer.name, id, filepath.Base(d.path), r)
		}
		if summary["worker"] != worker.name || summary["sha256"] != d.sha256 || int64(summary["size"].(float64)) != d.size ||
			summary["magic"] != "%PDF-" || int64(summary["job"].(float64)) != id || summary["attempt"].(float64) != 1 {
			t.Errorf("job %d (%s): result %v, want worker %s, sha256 %s, size %d, magic %%PDF-", id, filepath.Base(d.path), summary, worker.name, d.sha256, d.size)
		}
		// What the producer wrote is what it said it fetched.
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != r["sha256"] || int64(len(b)) != int64(r["size"].(float64)) {
			t.Errorf("job %d: the result file (%d bytes) is not what %s reported (%v)", id, len(b), producer.name, r)
		}
	}
	t.Logf("%s submitted %d PDFs (%d bytes), %s worked them, every result matched", producer.name, len(docs), totalSize(docs), worker.name)
}

func totalSize(docs []corpus) int64 {
	var n int64
	for _, d := range docs {
		n += d.size
	}
	return n
}

// digestMismatch: the client sends the document with another document's
// SHA-256; the server refuses it (422 digest-mismatch) and there is
// neither a job of the kind nor a new object in the store.
func digestMismatch(t *testing.T, a *apiDeployment, c *client, doc corpus) {
	kind := "mismatch-" + c.name
	before := a.storedObjects()
	wrong := sha256.Sum256([]byte("not the document"))
	e := a.refused(t, c, "acme", "submit", "--kind", kind, "--tenant", "acme", "--sha256", hex.EncodeToString(wrong[:]), doc.path)
	if e["status"].(float64) != 422 || e["reason"] != "digest-mismatch" || e["permanent"] != true {
		t.Errorf("%s's mismatched submit: %v, want 422 digest-mismatch, permanent", c.name, e)
	}
	for _, j := range a.jobs() {
		if j["kind"] == kind {
			t.Errorf("a job was enqueued for the mismatched payload: %v", j)
		}
	}
	if after := a.storedObjects(); !slices.Equal(before, after) {
		t.Errorf("the store changed with the refused payload:\nbefore %v\nafter  %v", before, after)
	}
}

// otherTenant: a globex job exists; acme's token gets 403 ticket-forbidden
// to submit for globex and claim globex's jobs, and 404 job-not-found (as
// for a job that does not exist) to read the job and fetch its result; a
// claim with acme's token for any of its tenants does not get it;
// globex's token works it.
func otherTenant(t *testing.T, a *apiDeployment, c *client, doc corpus) {
	kind := "secret-" + c.name
	s := a.example(t, c, "globex", "submit", "--kind", kind, "--tenant", "globex", doc.path)
	if len(s) != 1 {
		t.Fatalf("globex's submit printed %v", s)
	}
	id := fmt.Sprint(int64(s[0]["job"].(float64)))
	refused := func(what string, status float64, reason string, args ...string) {
		t.Helper()
		e := a.refused(t, c, "acme", args...)
		if e["status"].(float64) != status || e["reason"] != reason {
			t.Errorf("%s with acme's token on globex: %v, want %v %s", what, e, status, reason)
		}
	}
	refused("submit", 403, "ticket-forbidden", "submit", "--kind", kind, "--tenant", "globex", doc.path)
	refused("status", 404, "job-not-found", "status", id)
	refused("result", 404, "job-not-found", "result", id, filepath.Join(t.TempDir(), "result"))
	refused("claim", 403, "ticket-forbidden", "work", "--kind", kind, "--tenant", "globex", "--until-empty", "--wait", "0")
	if got := a.example(t, c, "acme", "work", "--kind", kind, "--until-empty", "--wait", "1"); len(got) != 0 {
		t.Errorf("acme's worker claimed globex's job: %v", got)
	}
	if got := a.example(t, c, "globex", "status", id); got[0]["dead"] != false || got[0]["state"] == "completed" {
		t.Errorf("globex's job after acme's attempts: %v, want it still to do", got[0])
	}
	if got := a.example(t, c, "globex", "work", "--kind", kind, "--max-jobs", "1", "--until-empty", "--wait", "30"); len(got) != 1 || got[0]["state"] != "completed" {
		t.Errorf("globex's worker: %v, want its one job completed", got)
	}
}

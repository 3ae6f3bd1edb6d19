package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestVersion: version opens nothing (no data directory is made) and names
// the module and Go's version, in text and in JSON.
func TestVersion(t *testing.T) {
	b := setup(t)
	out := b.ok("version")
	if !strings.HasPrefix(out, "claimcheck ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version printed %q, want \"claimcheck VERSION, revision …, %s\"", out, runtime.Version())
	}
	var v buildVersion
	if err := json.Unmarshal([]byte(b.ok("--json", "version")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Go != runtime.Version() || v.Module == "" || v.Version == "" {
		t.Errorf("version --json = %+v", v)
	}
	if _, err := os.Stat(b.data); !os.IsNotExist(err) {
		t.Errorf("version made the data directory %s (stat: %v)", b.data, err)
	}
}

// TestRunNoArguments: run with no arguments works testdata/pdf of the clone
// it runs in (here a stand-in clone holding two small PDFs, big.pdf already
// there), and outside a clone it refuses with a usage error (exit 2) that
// says what to pass, having made nothing.
func TestRunNoArguments(t *testing.T) {
	clone := t.TempDir()
	pdfs := filepath.Join(clone, "testdata", "pdf")
	if err := os.MkdirAll(pdfs, 0o755); err != nil {
		t.Fatal(err)
	}
	pixel, err := os.ReadFile(filepath.Join(corpusPath, "pixel.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"SOURCES.md": []byte("stand-in\n"), "pixel.pdf": pixel, "big.pdf": pixel} {
		if err := os.WriteFile(filepath.Join(pdfs, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := setup(t)
	t.Chdir(clone)
	var out struct {
		Jobs []struct {
			File  string `json:"file"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(b.ok("run", "--json")), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Jobs) != 2 {
		t.Fatalf("run with no arguments made %d jobs, want 2 (testdata/pdf's big.pdf and pixel.pdf)", len(out.Jobs))
	}
	for _, j := range out.Jobs {
		if j.State != "completed" || !strings.HasPrefix(j.File, filepath.Join("testdata", "pdf")) {
			t.Errorf("job of %s: %s, want completed from testdata/pdf", j.File, j.State)
		}
	}

	elsewhere := setup(t)
	t.Chdir(t.TempDir())
	r := elsewhere.run("", "run")
	if r.code != 2 || !strings.Contains(r.stderr, "run needs files or directories") {
		t.Errorf("run with no arguments outside a clone: exit %d, stderr %q; want 2 saying what to pass", r.code, r.stderr)
	}
	if _, err := os.Stat(elsewhere.data); !os.IsNotExist(err) {
		t.Errorf("the refused run made %s (stat: %v)", elsewhere.data, err)
	}
}

// TestCompletion: shell completion offers flag values and the ids of jobs
// (cobra's __complete, what the completion scripts call).
func TestCompletion(t *testing.T) {
	b := setup(t)
	id := b.submit("--kind", "x1", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "jobs", "--state", ""}, "retryable"},
		{[]string{"__complete", "lifecycle", "--format", ""}, "gcs"},
		{[]string{"__complete", "--log-level", ""}, "debug"},
		{[]string{"__complete", "inspect", ""}, strconv.FormatInt(id.ID, 10) + "\tx1 acme available"},
	} {
		out := b.ok(c.args...)
		if !strings.Contains(out, c.want) {
			t.Errorf("claimcheck %s: %q, want %q among the completions", strings.Join(c.args, " "), out, c.want)
		}
	}
}

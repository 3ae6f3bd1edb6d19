package cli

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// treeState lists every file and directory under root with its size,
// mode and modification time: equal before and after means nothing was
// written.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	state := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		state[rel] = fmt.Sprintf("%v %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// TestReadOnlyDataDirectory (issue 12, must-show 5 part 2): jobs, inspect,
// result, dead and sweep --dry-run work on a read-only copy of a data
// directory (cp -a, then chmod -R a-w: the tests run as root, who could
// still write there, so the check is that nothing is written at all: the
// copy's every file and directory keeps its size, mode and mtime, and no
// file appears). And any command but those that set up a deployment
// refuses a --database sqlite:// file that does not exist (exit 2),
// creating nothing.
func TestReadOnlyDataDirectory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	done := b.submit("--kind", "pdf-info", "--tenant", "acme", "--always-offload", filepath.Join(corpusPath, "pixel.pdf"))
	b.ok("work", "--kind", "pdf-info", "--until-empty")
	dead := b.submit("--kind", "fails", "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf"))
	b.dead("work", "--kind", "fails", "--until-empty", "--exec", "--", "sh", "-c", "exit 65")

	ro := filepath.Join(t.TempDir(), "snapshot")
	if out, err := exec.Command("cp", "-a", b.data, ro).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	if out, err := exec.Command("chmod", "-R", "a-w", ro).CombinedOutput(); err != nil {
		t.Fatalf("chmod -R a-w: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chmod", "-R", "u+w", ro).Run() })
	before := treeState(t, ro)
	snap := &cliBundle{t: t, data: ro}

	if js := snap.jobs(); len(js) != 2 {
		t.Fatalf("jobs on the read-only copy: %+v, want 2", js)
	}
	if out := snap.ok("inspect", strconv.FormatInt(done.ID, 10)); !strings.Contains(out, "completed") {
		t.Errorf("inspect on the read-only copy:\n%s", out)
	}
	if out := snap.ok("result", strconv.FormatInt(done.ID, 10)); !strings.Contains(out, `"page_count":1`) {
		t.Errorf("result on the read-only copy:\n%s", out)
	}
	if out := snap.ok("dead"); !strings.Contains(out, strconv.FormatInt(dead.ID, 10)) {
		t.Errorf("dead on the read-only copy does not list job %d:\n%s", dead.ID, out)
	}
	if out := snap.ok("sweep", "--dry-run"); !strings.Contains(out, "dry run") {
		t.Errorf("sweep --dry-run on the read-only copy:\n%s", out)
	}
	after := treeState(t, ro)
	for p, s := range after {
		if before[p] != s {
			t.Errorf("%s changed on the read-only copy: %q, was %q", p, s, before[p])
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s went from the read-only copy", p)
		}
	}

	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, args := range [][]string{{"jobs"}, {"inspect", "1"}, {"result", "1"}, {"dead"}, {"sweep", "--dry-run"}, {"sweep"}, {"dead", "replay", "1"}, {"jobs", "release", "1"}} {
		r := b.run("", append([]string{"--database", "sqlite://" + missing}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "SQLite database "+missing+" does not exist") {
			t.Errorf("%v with a missing --database: exit %d, want 2 naming the file\nstderr: %s", args, r.code, r.stderr)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Fatalf("%v created %s", args, missing)
		}
	}
}

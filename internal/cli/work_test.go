package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// databases are the job databases the command's worker tests run on:
// SQLite always, PostgreSQL with CLAIMCHECK_TEST_DATABASE_URL.
func databases(t *testing.T) map[string]func(testing.TB) string {
	dbs := map[string]func(testing.TB) string{"SQLite": dbtest.SQLite}
	if os.Getenv(dbtest.EnvPostgresURL) != "" || os.Getenv("CI") != "" {
		dbs["Postgres"] = dbtest.Postgres
	}
	return dbs
}

// bg runs claimcheck in the background on ctx and returns a function that
// waits for its result.
func (b *cliBundle) bg(ctx context.Context, args ...string) func() result {
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := Run(ctx, append([]string{"--data", b.data}, args...), strings.NewReader(""), &out, &errOut)
		done <- result{out.String(), errOut.String(), code}
	}()
	return func() result {
		select {
		case r := <-done:
			return r
		case <-time.After(2 * time.Minute):
			b.t.Fatalf("claimcheck %s did not return", strings.Join(args, " "))
			return result{}
		}
	}
}

// waitFile waits until path exists (a handler's sign that it runs).
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared: the handler did not start", path)
}

// The first SIGTERM or interrupt (ctx cancelled) lets a running 8 s --exec
// handler finish: the job completes on attempt 1 and work exits 0. With
// --drain-timeout 2s the job goes back to the queue, its attempt not
// spent, and the next worker completes it on attempt 1.
func TestWorkDrainsOnSignal(t *testing.T) {
	for name, newDB := range databases(t) {
		t.Run(name, func(t *testing.T) {
			b := setup(t)
			db := []string{"--database", newDB(t)}
			mark := filepath.Join(t.TempDir(), "started")
			handler := []string{"--exec", "--", "sh", "-c", "touch " + mark + "; sleep 8; cat"}
			j := b.submit(append(db, "--kind", "slow", "--tenant", "acme", filepath.Join(corpusPath, "TeXShopAndAsymptote.pdf"))...)

			ctx, cancel := context.WithCancel(context.Background())
			wait := b.bg(ctx, append(db, append([]string{"work", "--kind", "slow"}, handler...)...)...)
			waitFile(t, mark)
			cancel()
			r := wait()
			if r.code != 0 || !strings.Contains(r.stderr, "waiting up to 30s for job "+strconv.FormatInt(j.ID, 10)) {
				t.Fatalf("work after SIGTERM: exit %d, want 0 and what it waits for\nstderr: %s", r.code, r.stderr)
			}
			if got := b.jobs(append(db, "--kind", "slow")...); len(got) != 1 || got[0].State != "completed" || got[0].Attempts != 1 {
				t.Fatalf("after drain: %+v, want completed on attempt 1", got)
			}

			os.Remove(mark)
			j = b.submit(append(db, "--kind", "slow", "--tenant", "acme", filepath.Join(corpusPath, "TeXShopAndAsymptote.pdf"))...)
			ctx, cancel = context.WithCancel(context.Background())
			wait = b.bg(ctx, append(db, append([]string{"work", "--kind", "slow", "--drain-timeout", "2s"}, handler...)...)...)
			waitFile(t, mark)
			cancel()
			r = wait()
			if r.code != 0 || !strings.Contains(r.stderr, "go back to the queue, attempt not spent") {
				t.Fatalf("work after SIGTERM with --drain-timeout 2s: exit %d\nstderr: %s", r.code, r.stderr)
			}
			for _, got := range b.jobs(append(db, "--kind", "slow")...) {
				if got.ID == j.ID && (got.State != "available" || got.Attempts != 0) {
					t.Fatalf("released job: %+v, want available with 0 attempts", got)
				}
			}
			b.ok(append(db, append([]string{"work", "--kind", "slow", "--until-empty"}, handler...)...)...)
			for _, got := range b.jobs(append(db, "--kind", "slow")...) {
				if got.State != "completed" || got.Attempts != 1 {
					t.Errorf("next worker: %+v, want completed on attempt 1", got)
				}
			}
		})
	}
}

// The second signal stops at once: the --exec command's whole process
// group ends (a grandchild of sh -c included), and the job goes back to
// the queue.
func TestWorkSecondSignalEndsProcessGroup(t *testing.T) {
	b := setup(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	j := b.submit("--kind", "stuck", "--tenant", "acme", filepath.Join(corpusPath, "TeXShopAndAsymptote.pdf"))
	ctx, cancel := context.WithCancel(context.Background())
	actx, ab := withAbort(ctx)
	wait := b.bg(actx, "work", "--kind", "stuck", "--exec", "--", "sh", "-c", "sleep 300 & echo $! > "+pidFile+".tmp; mv "+pidFile+".tmp "+pidFile+"; wait")
	waitFile(t, pidFile)
	cancel()
	time.Sleep(200 * time.Millisecond)
	close(ab.ch)
	start := time.Now()
	r := wait()
	if r.code != 0 || !strings.Contains(r.stderr, "stopping at once") {
		t.Fatalf("work after two signals: exit %d\nstderr: %s", r.code, r.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("work took %s to stop after the second signal", d)
	}
	b2, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b2)))
	time.Sleep(100 * time.Millisecond)
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the grandchild (pid %d) of sh -c survived the second signal", pid)
	}
	if got := b.jobs("--kind", "stuck"); len(got) != 1 || got[0].ID != j.ID || got[0].State != "available" || got[0].Attempts != 0 {
		t.Errorf("after the second signal: %+v, want available with 0 attempts", got)
	}
}

// A failing --exec command's last 2 KiB of standard error are kept with
// the attempt's error: dead, dead --json and inspect show them.
func TestExecStderrKept(t *testing.T) {
	b := setup(t)
	j := b.submit("--kind", "noisy", "--tenant", "acme", filepath.Join(corpusPath, "TeXShopAndAsymptote.pdf"))
	script := `cat >/dev/null; i=0; while [ $i -lt 100 ]; do echo "filler line $i to push the start out of the tail" >&2; i=$((i+1)); done; echo "page 3: font Helvetica-Oblique not embedded" >&2; exit 65`
	b.dead("work", "--kind", "noisy", "--until-empty", "--exec", "--", "sh", "-c", script)
	want := "page 3: font Helvetica-Oblique not embedded"
	if out := b.ok("dead"); !strings.Contains(out, want) {
		t.Errorf("dead:\n%s", out)
	}
	var dead []struct {
		ID    int64  `json:"id"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(b.ok("dead", "--json")), &dead); err != nil || len(dead) != 1 {
		t.Fatalf("dead --json: %v %+v", err, dead)
	}
	if e := dead[0].Error; !strings.Contains(e, want) || strings.Contains(e, "filler line 0 ") || len(e) > stderrTail+200 {
		t.Errorf("dead --json error (%d bytes) = %q; want the stderr's last 2 KiB", len(e), e)
	}
	if out := b.ok("inspect", strconv.FormatInt(j.ID, 10)); !strings.Contains(out, want) {
		t.Errorf("inspect does not show the command's stderr:\n%s", out)
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting for its reaper has).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(after, "Z")
}

// On each broker, the first SIGTERM lets a running 8 s --exec handler
// finish (acknowledged on attempt 1, exit 0); with --drain-timeout 2s the
// delivery goes back to the queue at once, its attempt not spent (jobs
// shows it sent with 0 attempts), and the next worker completes it on
// attempt 1.
func TestBrokerWorkDrainsOnSignal(t *testing.T) {
	for _, bc := range brokers {
		t.Run(bc.name, func(t *testing.T) {
			u := bc.url(t)
			b := setup(t)
			mark := filepath.Join(t.TempDir(), "started")
			handler := []string{"--exec", "--", "sh", "-c", "touch " + mark + "; sleep 8; cat"}
			b.submit("--broker", u, "--kind", "slow", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
			ctx, cancel := context.WithCancel(context.Background())
			wait := b.bg(ctx, append([]string{"--broker", u, "work", "--kind", "slow"}, handler...)...)
			waitFile(t, mark)
			cancel()
			r := wait()
			if r.code != 0 || !strings.Contains(r.stderr, "waiting up to 30s for job") || !strings.Contains(r.stdout, "succeeded 1, retried 0") {
				t.Fatalf("work after SIGTERM: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if got := b.jobs(); len(got) != 1 || got[0].State != "completed" || got[0].Attempts != 1 {
				t.Fatalf("after drain: %+v, want completed on attempt 1", got)
			}

			os.Remove(mark)
			j := b.submit("--broker", u, "--kind", "slow", "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf"))
			ctx, cancel = context.WithCancel(context.Background())
			wait = b.bg(ctx, append([]string{"--broker", u, "work", "--kind", "slow", "--drain-timeout", "2s"}, handler...)...)
			waitFile(t, mark)
			cancel()
			if r := wait(); r.code != 0 || !strings.Contains(r.stderr, "go back to the queue, attempt not spent") {
				t.Fatalf("work after SIGTERM with --drain-timeout 2s: exit %d\nstderr: %s", r.code, r.stderr)
			}
			for _, got := range b.jobs() {
				if got.ID == j.ID && (got.State != "sent" || got.Attempts != 0) {
					t.Errorf("released job: %+v, want sent (back in the queue) with 0 attempts", got)
				}
			}
			b.ok(append([]string{"--broker", u, "work", "--kind", "slow", "--until-empty", "--idle", "4s"}, handler...)...)
			for _, got := range b.jobs() {
				if got.State != "completed" || got.Attempts != 1 {
					t.Errorf("next worker: %+v, want completed on attempt 1", got)
				}
			}
		})
	}
}

package cli

// The fault trials of the command (issue 27, docs/chaos.md): gated by
// CLAIMCHECK_TEST_CHAOS=1 like pipeline.TestChaosPostgresKilled, run by
// scripts/chaos.sh, each printing one line
// CHAOS|<trial>|<jobs>|<lost>|<dups>|<dead>|<secs to recover> for its
// table. Handler runs are counted by the handler itself (countedHandler).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
)

// envChaos gates the fault trials: they kill workers, take the store away
// and fill disks, and take minutes.
const envChaos = "CLAIMCHECK_TEST_CHAOS"

// envChaosOutage sets how long TestChaosS3Outage takes the store away (a Go
// duration, default 20s); a long outage (3m, 10m) is run by hand
// (docs/chaos.md).
const envChaosOutage = "CLAIMCHECK_TEST_CHAOS_OUTAGE"

// envChaosJobs sets how many jobs TestChaosS3Outage submits, all in
// flight at once (default 8, 6 in flight); the long runs by hand use 20.
const envChaosJobs = "CLAIMCHECK_TEST_CHAOS_JOBS"

func requireChaos(t *testing.T) {
	t.Helper()
	if os.Getenv(envChaos) == "" {
		t.Skip(envChaos + " is not set: the fault trials run only when asked (scripts/chaos.sh)")
	}
}

// chaosRow prints the trial's line of scripts/chaos.sh's table.
func chaosRow(trial string, jobs, lost, dups, dead int, recovered time.Duration) {
	fmt.Printf("CHAOS|%s|%d|%d|%d|%d|%.0f\n", trial, jobs, lost, dups, dead, recovered.Seconds())
}

// countedHandler is an sh -c script that runs body as the job's handler and
// counts its runs in the file runs: a line "<job id> start" before body and
// "<job id> end" once body has succeeded.
func countedHandler(runs, body string) string {
	q := "'" + strings.ReplaceAll(runs, "'", `'\''`) + "'"
	return `echo "$CLAIMCHECK_JOB_ID start" >> ` + q + ` && { ` + body + `; } && echo "$CLAIMCHECK_JOB_ID end" >> ` + q
}

// handlerRuns reads a countedHandler's file: each job's runs, and those
// that ran to their end.
func handlerRuns(t *testing.T, path string) (runs, finished map[string]int) {
	t.Helper()
	runs, finished = map[string]int{}, map[string]int{}
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		id, what, _ := strings.Cut(line, " ")
		switch what {
		case "start":
			runs[id]++
		case "end":
			finished[id]++
		}
	}
	return runs, finished
}

// duplicates is the handler runs that ran to their end beyond each job's
// first: the effects a handler had twice.
func duplicates(finished map[string]int) int {
	n := 0
	for _, f := range finished {
		n += max(0, f-1)
	}
	return n
}

// lines counts the lines of a countedHandler's file that say what.
func countLines(path, what string) int {
	raw, _ := os.ReadFile(path)
	return strings.Count(string(raw), " "+what+"\n")
}

// stampedLines is an io.Writer that keeps each line written with the time
// it was completed, for a command's standard error.
type stampedLines struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	all   bytes.Buffer
	at    []time.Time
	lines []string
}

func (w *stampedLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.Reset()
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.at = append(w.at, time.Now())
		w.lines = append(w.lines, strings.TrimSuffix(line, "\n"))
	}
}

func (w *stampedLines) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// between returns the lines completed from start to end, each prefixed
// with its time since start.
func (w *stampedLines) between(start, end time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for i, at := range w.at {
		if !at.Before(start) && !at.After(end) {
			out = append(out, fmt.Sprintf("+%5.1fs %s", at.Sub(start).Seconds(), w.lines[i]))
		}
	}
	return out
}

// waitExit waits up to within for the process to exit and returns its exit
// status; it fails t (killing the process) if it has not.
func (p *process) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		p.cmd.Process.Kill()
		<-done
		t.Fatalf("the process did not exit within %s:\n%s", within, p.out.String())
		return -1
	}
}

// jobStates returns the jobs of kind by state.
func (b *cliBundle) jobStates(database []string, kind string) (all []jobJSON, completed, dead int) {
	b.t.Helper()
	all = b.jobs(append(database, "--kind", kind)...)
	for _, j := range all {
		switch j.State {
		case "completed":
			completed++
		case "discarded", "cancelled":
			dead++
		}
	}
	return all, completed, dead
}

// chaosName is a subtest's database name as the table shows it.
func chaosName(t *testing.T) string {
	if strings.HasSuffix(t.Name(), "/SQLite") {
		return "sqlite"
	}
	return "postgres"
}

// worker-kill9: two `claimcheck work` processes (2 handlers each, a 4 s
// lease) are killed with -9 while their handlers run; a third, work
// --until-empty, works the rest, and the killed workers' jobs once River's
// rescuer (every 30 s) finds their leases expired. No job is lost, none
// dead, and no handler that ran to its end runs again.
func TestChaosWorkerKill9(t *testing.T) {
	requireChaos(t)
	eachJobDatabase(t, func(t *testing.T, b *cliBundle, database []string) {
		const jobs = 12
		kind := "kill9"
		for range jobs {
			b.submit(append(database, "--kind", kind, "--tenant", "acme", payloadFile(t, 100<<10))...)
		}
		runs := filepath.Join(t.TempDir(), "runs")
		lease := []string{envTestLease + "=4s"}
		work := func(flags ...string) []string {
			args := append(append(append([]string{}, database...), "work", "--kind", kind, "--concurrency", "2"), flags...)
			return append(args, "--exec", "--", "sh", "-c", countedHandler(runs, "sleep 3; cat"))
		}
		w1, w2 := b.startEnv(lease, work()...), b.startEnv(lease, work()...)
		waitRuns := func(n int) {
			t.Helper()
			for deadline := time.Now().Add(2 * time.Minute); countLines(runs, "start") < n; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("fewer than %d handler runs started within 2 minutes", n)
				}
			}
		}
		waitRuns(3)
		time.Sleep(500 * time.Millisecond) // both workers' handlers in their sleep
		w1.kill9(t)
		t.Logf("worker 1 killed with -9: %d handler runs started, %d ended", countLines(runs, "start"), countLines(runs, "end"))
		waitRuns(countLines(runs, "start") + 1)
		time.Sleep(500 * time.Millisecond)
		w2.kill9(t)
		killed := time.Now()
		started, ended := countLines(runs, "start"), countLines(runs, "end")
		t.Logf("worker 2 killed with -9: %d handler runs started, %d ended", started, ended)

		w3 := b.startEnv(lease, work("--until-empty")...)
		if code := w3.waitExit(t, 4*time.Minute); code != 0 {
			t.Errorf("work --until-empty after the kills: exit %d\n%s", code, w3.out.String())
		}
		recovered := time.Since(killed)
		all, completed, dead := b.jobStates(database, kind)
		runsOf, finished := handlerRuns(t, runs)
		attempts := map[int]int{}
		for _, j := range all {
			attempts[j.Attempts]++
			if j.State != "completed" {
				t.Errorf("job %d: %s (%s) after %d attempts", j.ID, j.State, j.Reason, j.Attempts)
			}
			if id := strconv.FormatInt(j.ID, 10); finished[id] > 1 {
				t.Errorf("job %d: its handler ran to its end %d times (%d runs)", j.ID, finished[id], runsOf[id])
			}
		}
		dups := duplicates(finished)
		t.Logf("%d jobs: %d completed (attempts: %v), %d dead; %d handler runs cut by the kills; the last job done %v after the second kill",
			jobs, completed, attempts, dead, started-ended, recovered.Round(100*time.Millisecond))
		chaosRow("worker-kill9-"+chaosName(t), jobs, jobs-completed-dead, dups, dead, recovered)
	})
}

// sigterm-drain: SIGTERM to a `claimcheck work` process while two 4 s
// handlers run: it lets them finish and exits 0, their jobs completed on
// attempt 1; the jobs it had not started stay queued, attempt not spent,
// and the next worker completes them on attempt 1.
func TestChaosSigtermDrain(t *testing.T) {
	requireChaos(t)
	eachJobDatabase(t, func(t *testing.T, b *cliBundle, database []string) {
		const jobs = 6
		kind := "drain"
		for range jobs {
			b.submit(append(database, "--kind", kind, "--tenant", "acme", payloadFile(t, 100<<10))...)
		}
		runs := filepath.Join(t.TempDir(), "runs")
		handler := []string{"--exec", "--", "sh", "-c", countedHandler(runs, "sleep 4; cat")}
		w := b.start(append(append(append([]string{}, database...), "work", "--kind", kind, "--concurrency", "2"), handler...)...)
		for deadline := time.Now().Add(2 * time.Minute); countLines(runs, "start") < 2; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the worker started fewer than 2 handlers within 2 minutes")
			}
		}
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		termed := time.Now()
		code := w.waitExit(t, time.Minute)
		recovered := time.Since(termed)
		out := w.out.String()
		if code != 0 || !strings.Contains(out, "waiting up to") {
			t.Errorf("work after SIGTERM: exit %d, want 0 saying what it waits for\n%s", code, out)
		}
		atTerm := countLines(runs, "end")
		all, _, _ := b.jobStates(database, kind)
		for _, j := range all {
			if j.State == "completed" && j.Attempts != 1 || j.State != "completed" && (j.State != "available" || j.Attempts != 0) {
				t.Errorf("after the drain: job %d %s on attempt %d, want completed on attempt 1 or available with 0 attempts", j.ID, j.State, j.Attempts)
			}
		}
		b.ok(append(append(append([]string{}, database...), "work", "--kind", kind, "--until-empty"), handler...)...)
		all, completed, dead := b.jobStates(database, kind)
		for _, j := range all {
			if j.State != "completed" || j.Attempts != 1 {
				t.Errorf("job %d: %s on attempt %d, want completed on attempt 1", j.ID, j.State, j.Attempts)
			}
		}
		_, finished := handlerRuns(t, runs)
		t.Logf("SIGTERM with 2 handlers running: exit %d after %v, %d handlers had finished; then %d of %d jobs completed",
			code, recovered.Round(100*time.Millisecond), atTerm, completed, jobs)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "waiting up to") {
				t.Logf("work said: %s", line)
			}
		}
		chaosRow("sigterm-drain-"+chaosName(t), jobs, jobs-completed-dead, duplicates(finished), dead, recovered)
	})
}

// s3-cut and s3-blackhole: the S3 store (SeaweedFS) behind an outage
// proxy goes away for CLAIMCHECK_TEST_CHAOS_OUTAGE (default 20 s) with 8
// jobs, 6 in flight (--concurrency 6; CLAIMCHECK_TEST_CHAOS_JOBS=N: N jobs,
// all in flight): cut closes every connection and
// refuses new ones, blackhole lets them in and answers nothing. No job is
// dead, and all are done within 15 s of the store's return. The lines
// work printed during the outage are logged.
func TestChaosS3Outage(t *testing.T) {
	requireChaos(t)
	outage := envDuration(t, envChaosOutage, 20*time.Second)
	for _, mode := range []string{"cut", "blackhole"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			jobs, inFlight := 8, 6
			if v := os.Getenv(envChaosJobs); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					t.Fatalf("%s=%q: want a number of jobs", envChaosJobs, v)
				}
				jobs, inFlight = n, n
			}
			o := s3OutageTrial(t, mode, outage, jobs, inFlight)
			for _, line := range o.during {
				t.Logf("work during the outage: %s", line)
			}
			if o.recovered > 15*time.Second {
				t.Errorf("the last job was done %v after the store came back, want within 15 s", o.recovered.Round(100*time.Millisecond))
			}
			dups := duplicates(o.finished)
			for id, n := range o.finished {
				if n > 1 {
					t.Logf("job %s: its handler ran to its end %d times (%d runs): the outage refused its result", id, n, o.runs[id])
				}
			}
			chaosRow(fmt.Sprintf("s3-%s-%s", mode, outage), jobs, jobs-o.completed-o.dead, dups, o.dead, o.recovered)
		})
	}
}

// idempotency: 8 producer processes submit 8 different files under one
// idempotency key at once: one job, seven refused as idempotency-conflict,
// and no payload object left behind by the refused (orphans).
func TestChaosIdempotency(t *testing.T) {
	requireChaos(t)
	eachJobDatabase(t, func(t *testing.T, b *cliBundle, database []string) {
		const producers = 8
		kind := "idem"
		b.ok(append(database, "migrate")...) // the deployment exists; the producers race on the key only
		start := time.Now()
		ps := make([]*process, producers)
		for i := range ps {
			ps[i] = b.start(append(database, "submit", "--json", "--kind", kind, "--tenant", "acme", "--idempotency-key", "order-8", payloadFile(t, 100<<10))...)
		}
		jobs, conflicts := 0, 0
		for i, p := range ps {
			code := p.waitExit(t, 2*time.Minute)
			out := p.out.String()
			switch {
			case code == 0:
				jobs++
			case strings.Contains(out, "idempotency-conflict"):
				conflicts++
			default:
				t.Errorf("producer %d: exit %d\n%s", i, code, out)
			}
		}
		took := time.Since(start)
		all := b.jobs(append(database, "--kind", kind)...)
		objects := b.objects()
		orphans := 0
		if len(all) == 1 {
			key := b.payloadKey(all[0].ID, database...)
			for k := range objects {
				if k != key {
					orphans++
				}
			}
		}
		t.Logf("%d producers, one key: %d submits succeeded, %d idempotency-conflict, %d jobs, %d objects (%d orphans), %v",
			producers, jobs, conflicts, len(all), len(objects), orphans, took.Round(100*time.Millisecond))
		if jobs != 1 || conflicts != producers-1 || len(all) != 1 || orphans != 0 {
			t.Errorf("want 1 job, %d idempotency-conflict, 0 orphans", producers-1)
		}
		// lost: a succeeded submit without its job; dups: jobs beyond one.
		chaosRow("idempotency-"+chaosName(t), len(all), max(0, jobs-len(all)), max(0, len(all)-1)+orphans, 0, 0)
	})
}

// enospc: the store is a file store on a 2 MiB tmpfs (root only; skipped
// otherwise, failed under CI) and each handler writes a 3 MiB result:
// the result's check-in fails naming "no space left on device" and is
// tried again, the handler not run again; no job is dead or lost, and once
// the tmpfs is grown (remount, 64 MiB) the waiting check-ins succeed and
// work --until-empty returns, every job completed.
func TestChaosENOSPC(t *testing.T) {
	requireChaos(t)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=2m"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mount a 2 MiB tmpfs: %v", err)
		}
		t.Skipf("mount a 2 MiB tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	b := setup(t)
	store := []string{"--store", "file://" + filepath.Join(dir, "objects")}
	const jobs = 3
	kind := "enospc"
	for range jobs {
		b.submit(append(store, "--kind", kind, "--tenant", "acme", payloadFile(t, 100<<10))...)
	}
	runs := filepath.Join(t.TempDir(), "runs")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stderr := &stampedLines{}
	done := make(chan int, 1)
	go func() {
		args := append(append([]string{"--data", b.data}, store...), "work", "--kind", kind, "--concurrency", "3", "--until-empty",
			"--exec", "--", "sh", "-c", countedHandler(runs, "cat >/dev/null; head -c 3145728 /dev/zero"))
		done <- Run(ctx, args, strings.NewReader(""), &strings.Builder{}, stderr)
	}()
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(stderr.String(), "no space left on device"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("work did not say \"no space left on device\" within 2 minutes:\n%s", stderr.String())
		}
	}
	time.Sleep(3 * time.Second) // a few more tries
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "no space left") {
			t.Logf("work said: %s", line)
		}
	}
	if _, completed, dead := b.jobStates(nil, kind); completed+dead == jobs {
		t.Errorf("with the store full: %d completed, %d dead; want jobs waiting", completed, dead)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	grown := time.Now()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("work --until-empty: exit %d\n%s", code, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("work --until-empty did not return within 5 minutes:\n%s", stderr.String())
	}
	recovered := time.Since(grown)
	all, completed, dead := b.jobStates(nil, kind)
	for _, j := range all {
		if j.State != "completed" || j.Attempts != 1 {
			t.Errorf("job %d after the disk was grown: %s (%s), attempts %d; want completed on attempt 1", j.ID, j.State, j.Reason, j.Attempts)
		}
	}
	runsOf, finished := handlerRuns(t, runs)
	n := 0
	for _, r := range runsOf {
		n += r
	}
	t.Logf("%d jobs, %d handler runs; %d completed %v after the disk was grown", jobs, n, completed, recovered.Round(100*time.Millisecond))
	chaosRow("enospc", jobs, jobs-completed-dead, duplicates(finished), dead, recovered)
}

// lost-key: jobs sealed inline under the data directory's key file
// (<data>/keys/kek.key), the file removed, and a submit: refused with
// exit 2 naming the lost key's id, and no new key file written (a new key
// would leave the sealed jobs unreadable and hide the loss).
func TestChaosLostKey(t *testing.T) {
	requireChaos(t)
	eachJobDatabase(t, func(t *testing.T, b *cliBundle, database []string) {
		const jobs = 3
		for i := range jobs {
			f := filepath.Join(t.TempDir(), "p.txt")
			if err := os.WriteFile(f, []byte("sealed inline "+strconv.Itoa(i)), 0o600); err != nil {
				t.Fatal(err)
			}
			if j := b.submit(append(database, "--kind", "count", "--tenant", "acme", f)...); !j.Inline {
				t.Fatalf("job %d is not inline", j.ID)
			}
		}
		path := filepath.Join(b.data, "keys", keyFileName)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		key, err := claimcheck.DecodeLocalKey(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		id := claimcheck.LocalKeyID(key)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "q.txt")
		if err := os.WriteFile(f, []byte("after the key was lost"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := b.run("", append(database, "submit", "--kind", "count", "--tenant", "acme", f)...)
		t.Logf("submit without the key file: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
		if r.code != 2 || !strings.Contains(r.stderr, id) {
			t.Errorf("submit without the key file: exit %d, want 2 naming the key id %s", r.code, id)
		}
		newKey := 0
		if _, err := os.Stat(path); err == nil {
			newKey = 1
			t.Errorf("a new key file %s was written", path)
		}
		// jobs without a keeper: it lists tickets, and opens no payload.
		all := b.jobs(append(database, "--keeper", "none", "--kind", "count")...)
		// lost: sealed jobs gone; dups: a job made by the refused submit or
		// a new key file.
		chaosRow("lost-key-"+chaosName(t), jobs, max(0, jobs-len(all)), max(0, len(all)-jobs)+newKey, 0, 0)
	})
}

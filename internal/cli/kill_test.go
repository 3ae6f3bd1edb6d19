package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/claimcheck/claimcheck/internal/testenv"
)

// envAsCommand makes the test binary the claimcheck command (TestMain), so
// that a test can run a worker as a process of its own and kill it.
const envAsCommand = "CLAIMCHECK_TEST_AS_COMMAND"

// envTestLease, with envAsCommand, sets the command's job lease (a Go
// duration; testLease): the fault trials' workers killed with -9 are
// rescued within seconds.
const envTestLease = "CLAIMCHECK_TEST_LEASE"

// EnvKilledWorker, set to 1, makes TestKilledWorkerJobRunsAgain measure
// every source with the default settings: the job database's (lease 2 min
// + River's rescuer every 30 s) takes up to 2.5 min per database and
// JetStream's (ack wait 1 min) up to a minute, too long for CI, which
// measures RabbitMQ only (redelivered when the connection closes).
const EnvKilledWorker = "CLAIMCHECK_TEST_KILLED_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(envAsCommand) == "1" {
		if v := os.Getenv(envTestLease); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s=%q: %v\n", envTestLease, v, err)
				os.Exit(2)
			}
			testLease = d
		}
		os.Exit(Execute())
	}
	os.Exit(m.Run())
}

// process is claimcheck running as a process of its own.
type process struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// start runs claimcheck as a process of its own with --data set to the
// bundle's directory; it is killed, if still running, when the test ends.
func (b *cliBundle) start(args ...string) *process {
	b.t.Helper()
	return b.startEnv(nil, args...)
}

// startEnv is start with env (KEY=value) added to the process's
// environment.
func (b *cliBundle) startEnv(env []string, args ...string) *process {
	b.t.Helper()
	p := &process{cmd: exec.Command(os.Args[0], append([]string{"--data", b.data}, args...)...)}
	p.cmd.Env = append(append(os.Environ(), envAsCommand+"=1"), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
		if b.t.Failed() {
			b.t.Logf("claimcheck %s:\n%s", strings.Join(args, " "), p.out.String())
		}
	})
	return p
}

// kill9 kills the process with SIGKILL and reaps it.
func (p *process) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
}

// readPid reads a process id a handler wrote.
func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// waitGone waits up to 5 s for pid to exit, and reports whether it did.
func waitGone(pid int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !alive(pid) {
			return true
		}
	}
	return false
}

// A worker killed with SIGKILL leaves no part of its --exec command
// running: neither the command (sh -c, the parent-death signal) nor the
// command's own child (sleep 300, ended by the watchdog of its process
// group). jobs release refuses the job while its lease is fresh (the
// killed worker renewed it moments ago), --force returns it to the queue
// without spending its attempt, and the next worker completes it on
// attempt 1.
func TestKilledWorkerLeavesNoGrandchild(t *testing.T) {
	b := setup(t)
	dir := t.TempDir()
	shPid, childPid := filepath.Join(dir, "sh"), filepath.Join(dir, "child")
	j := b.submit("--kind", "stuck", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
	w := b.start("work", "--kind", "stuck", "--exec", "--", "sh", "-c",
		"echo $$ > "+shPid+"; sleep 300 & echo $! > "+childPid+".tmp; mv "+childPid+".tmp "+childPid+"; wait")
	waitFile(t, childPid)
	sh, child := readPid(t, shPid), readPid(t, childPid)
	w.kill9(t)
	for name, pid := range map[string]int{"the command (sh -c)": sh, "its child (sleep 300)": child} {
		if !waitGone(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s, pid %d, outlived the killed worker by 5 s", name, pid)
		}
	}
	id := strconv.FormatInt(j.ID, 10)
	if r := b.run("", "jobs", "release", id); r.code != 1 || !strings.Contains(r.stderr, "held by a live worker") {
		t.Errorf("jobs release of a fresh lease: exit %d, want 1 naming the live worker\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	b.ok("jobs", "release", "--force", id)
	b.ok("work", "--kind", "stuck", "--until-empty", "--exec", "--", "cat")
	if got := b.jobs("--kind", "stuck"); len(got) != 1 || got[0].State != "completed" || got[0].Attempts != 1 {
		t.Errorf("after release --force and the next worker: %+v, want completed on attempt 1", got)
	}
}

// killedSource is a job source for TestKilledWorkerJobRunsAgain: the
// global flags that select it, and whether CI measures it.
type killedSource struct {
	name  string
	flags func(t *testing.T) []string
	slow  bool // up to minutes with the defaults: only with EnvKilledWorker
}

// The job of a worker killed with SIGKILL while its handler runs is worked
// again by another worker, with the default settings, on every source;
// the test logs how long after the kill that took (the figure:
// under 5 minutes). The job database rescues it once its lease (2 min)
// has expired, at River's next rescuer run (every 30 s); RabbitMQ
// redelivers it as soon as the killed worker's connection closes;
// JetStream once its ack wait (1 min, last extended up to 20 s before
// the kill) runs out; SQS (fauxqs) once the queue's visibility timeout
// (SQS's default, 30 s, last extended up to 10 s before the kill) does. The handler's second run is attempt 2: a crash
// spends the attempt (a job that kills its worker is not retried forever).
func TestKilledWorkerJobRunsAgain(t *testing.T) {
	all := os.Getenv(EnvKilledWorker) == "1"
	var sources []killedSource
	for name, newDB := range databases(t) {
		sources = append(sources, killedSource{name, func(t *testing.T) []string { return []string{"--database", newDB(t)} }, true})
	}
	for _, bc := range brokers {
		sources = append(sources, killedSource{bc.name, func(t *testing.T) []string { return []string{"--broker", bc.url(t)} }, bc.name != "RabbitMQ"})
	}
	if os.Getenv(envFauxqs) != "" || os.Getenv("CI") != "" {
		sources = append(sources, killedSource{"SQS", func(t *testing.T) []string { return []string{"--broker", fauxqsBroker(t)} }, true})
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			if src.slow && !all {
				t.Skipf("takes minutes with the default settings; measure with %s=1", EnvKilledWorker)
			}
			b := setup(t)
			global := src.flags(t)
			runs := filepath.Join(t.TempDir(), "runs")
			handler := []string{"--exec", "--", "sh", "-c", `echo "$CLAIMCHECK_ATTEMPT" >> ` + runs + `; sleep 600; cat`}
			b.submit(append(global, "--kind", "crash", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))...)
			w := b.start(append(global, append([]string{"work", "--kind", "crash"}, handler...)...)...)
			waitLines(t, runs, 1, time.Minute)
			w.kill9(t)
			killed := time.Now()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wait := b.bg(ctx, append(global, append([]string{"work", "--kind", "crash", "--drain-timeout", "100ms"}, handler...)...)...)
			lines := waitLines(t, runs, 2, 6*time.Minute)
			took := time.Since(killed)
			cancel()
			wait()
			t.Logf("%s: the killed worker's job ran again %s after the kill (attempt %s)", src.name, took.Round(100*time.Millisecond), lines[1])
			if took > 5*time.Minute {
				t.Errorf("the job ran again %s after the kill, want under 5 min", took)
			}
			if lines[1] != "2" {
				t.Errorf("second run is attempt %s, want 2", lines[1])
			}
		})
	}
}

// waitLines waits until path has at least n lines and returns them.
func waitLines(t *testing.T, path string, n int, within time.Duration) []string {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		if lines := strings.Fields(string(b)); len(lines) >= n {
			return lines
		}
	}
	t.Fatalf("%s: fewer than %d lines after %s", path, n, within)
	return nil
}

// envFauxqs is the endpoint of fauxqs, the SQS emulator (scripts/fauxqs.sh
// env).
const envFauxqs = "CLAIMCHECK_TEST_SQS_ENDPOINT"

// fauxqsBroker creates a queue with SQS's default settings and its
// dead-letter queue on fauxqs, deleted when t ends, and returns their
// sqs:// URL. It sets fauxqs's (any) credentials in the environment, for
// the command's processes too.
func fauxqsBroker(t *testing.T) string {
	endpoint := testenv.Require(t, envFauxqs, `eval "$(scripts/fauxqs.sh env)"`)
	t.Setenv("AWS_ACCESS_KEY_ID", "fauxqs")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fauxqs")
	t.Setenv("AWS_REGION", "us-east-1")
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("fauxqs", "fauxqs", "")})
	name := fmt.Sprintf("cctest-cli-%d", time.Now().UnixNano())
	var urls []string
	for _, n := range []string{name, name + "-dead"} {
		out, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(n)})
		if err != nil {
			t.Fatalf("CreateQueue %s: %v", n, err)
		}
		u := aws.ToString(out.QueueUrl)
		t.Cleanup(func() { c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}) })
		urls = append(urls, u)
	}
	return "sqs://?" + url.Values{"queue_url": {urls[0]}, "dead_letter_queue_url": {urls[1]}, "endpoint": {endpoint}}.Encode()
}

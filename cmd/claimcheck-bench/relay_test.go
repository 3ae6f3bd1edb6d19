package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/internal/benchlab"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// buildLab builds cmd/claimcheck-bench into a temporary directory: bench
// relay runs the relay as a child process, which the test binary cannot be.
func buildLab(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatalf("the go command: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "claimcheck-bench")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/claimcheck-bench")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/claimcheck-bench: %v\n%s", err, out)
	}
	return bin
}

// TestBenchRelay runs bench relay against RabbitMQ at a small scale: both
// backlogs set up, relayed by a child process, every entry sent, peak RSS
// read, the scratch directories removed and the queue deleted.
func TestBenchRelay(t *testing.T) {
	u := testenv.Require(t, "CLAIMCHECK_TEST_AMQP_URL", "a RabbitMQ server, e.g. amqp://guest:guest@127.0.0.1:5672/")
	u = strings.TrimSuffix(u, "/") + fmt.Sprintf("/?queue=cctest.benchrelay.%d", time.Now().UnixNano())
	t.Cleanup(func() { dropTopology(t, u) })

	bin := buildLab(t)
	saved := relayChild
	relayChild = func() (string, []string, error) { return bin, nil, nil }
	t.Cleanup(func() { relayChild = saved })

	for _, mode := range []string{"--window=3s", "--until-empty"} {
		t.Run(strings.TrimPrefix(mode, "--"), func(t *testing.T) { benchRelay(t, u, mode) })
	}
}

// benchRelay runs bench relay with 40 entries in mode (--window=D or
// --until-empty) and checks its report.
func benchRelay(t *testing.T, u, mode string) {
	b := setup(t)
	r := b.run("", "--broker", u, "bench", "relay", "--entries", "40", "--small", "4", "--total", "4MiB", mode, "--json")
	var rep benchlab.RelayReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("exit %d, stdout is not the JSON report: %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	t.Logf("report: %s\nstderr: %s", r.stdout, r.stderr)
	// The check itself may fail at this scale (a few MiB of caches are
	// the whole difference); a FAIL must exit 1 and anything else 0.
	if want := map[string]int{"PASS": 0, "SKIP": 0, "FAIL": 1}[rep.Status]; rep.Status == "" || r.code != want {
		t.Fatalf("status %q, exit %d\nstderr: %s", rep.Status, r.code, r.stderr)
	}
	const each = 4 * bench.MiB / 40
	if rep.EntryBytes != each || rep.Batch != 100 || rep.Destination != "default" || rep.MaxRatio != benchlab.RelayMaxRatio {
		t.Errorf("report header: %+v", rep)
	}
	if strings.Contains(r.stdout+r.stderr, "guest:guest") {
		t.Errorf("the broker password is printed")
	}
	if len(rep.Phases) != 2 {
		t.Fatalf("phases %+v, want small and large", rep.Phases)
	}
	for i, want := range []struct {
		name    string
		entries int
	}{{benchlab.RelayPhaseSmall, 4}, {benchlab.RelayPhaseLarge, 40}} {
		p := rep.Phases[i]
		if p.Name != want.name || p.Entries != want.entries || p.Sent != int64(want.entries) || p.PayloadBytes != int64(want.entries)*each {
			t.Errorf("phase %d: %+v, want %s with %d entries, all sent", i, p, want.name, want.entries)
		}
		if p.Seconds <= 0 || p.EntriesPerSec <= 0 || p.SetupSeconds <= 0 {
			t.Errorf("phase %s: times %+v", p.Name, p)
		}
		// Until empty, the relay exits once its backlog is sent, long
		// before a window would end (3 s is enough for 40 entries here).
		if mode == "--until-empty" && p.Seconds >= 3 {
			t.Errorf("phase %s: relay ran %.1f s: was it run until empty?", p.Name, p.Seconds)
		}
		if runtime.GOOS == "linux" && (p.PeakRSS == 0 || p.SampledHWM == 0) {
			t.Errorf("phase %s: no peak RSS: %+v", p.Name, p)
		}
	}
	if runtime.GOOS == "linux" && (rep.Ratio <= 0 || rep.RSSMethod != benchlab.RSSMethodChild) {
		t.Errorf("ratio %v, rss method %q", rep.Ratio, rep.RSSMethod)
	}
	if strings.Contains(r.stderr, "could not delete") || !strings.Contains(r.stderr, "setup large: 40/40 entries") {
		t.Errorf("stderr: %s", r.stderr)
	}
	left, _ := filepath.Glob(filepath.Join(b.data, "bench-relay-*"))
	if len(left) != 0 {
		t.Errorf("scratch directories left: %v", left)
	}
}

// TestBenchRelayUsage: bad flags are usage errors before anything runs.
func TestBenchRelayUsage(t *testing.T) {
	t.Setenv("CLAIMCHECK_BROKER", "")
	t.Setenv("CLAIMCHECK_DATABASE", "")
	b := setup(t)
	for _, args := range [][]string{
		{"bench", "relay"}, // no --broker
		{"--broker", "amqp://127.0.0.1:1/?queue=x", "bench", "relay", "--small", "11", "--entries", "10"},
		{"--broker", "amqp://127.0.0.1:1/?queue=x", "bench", "relay", "--total", "lots"},
		{"--broker", "amqp://127.0.0.1:1/?queue=x", "bench", "relay", "--window", "10ms"},
		{"--broker", "amqp://127.0.0.1:1/?queue=x", "bench", "relay", "--window", "5s", "--until-empty"},
		{"--broker", "amqp://127.0.0.1:1/?queue=x", "bench", "relay", "--window", "30s", "--until-empty"}, // the default, given
		{"--broker", "amqp://127.0.0.1:1/?queue=x", "bench", "relay", "--entries", "10", "--total", "9"},
		{"--broker", "amqp://127.0.0.1:1/?queue=x", "--database", "sqlite:///tmp/x.db", "bench", "relay"},
		{"--broker", "amqp://127.0.0.1:1/?queue=x", "--store", "mem://", "bench", "relay"},
		// Each backlog is a deployment of its own: one store cannot hold
		// both (the second one's key is refused).
		{"--broker", "amqp://127.0.0.1:1/?queue=x", "--store", "file://" + filepath.ToSlash(t.TempDir()), "bench", "relay"},
	} {
		if r := b.run("", args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2\nstderr: %s", args, r.code, r.stderr)
		}
	}
}

// TestBenchRelayRefusesTotalAboveFreeSpace: a --total the data directory's
// disk cannot hold is refused (exit 2) before anything is written, naming
// the flag; a user's typo once filled a shared disk with 32.5 GiB.
func TestBenchRelayRefusesTotalAboveFreeSpace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the free-space check is Linux's (statfs)")
	}
	t.Setenv("CLAIMCHECK_BROKER", "")
	t.Setenv("CLAIMCHECK_DATABASE", "")
	b := setup(t)
	r := b.run("", "--broker", "amqp://127.0.0.1:1/?queue=x", "bench", "relay", "--entries", "10", "--small", "1", "--total", "1000TiB")
	if r.code != 2 || !strings.Contains(r.stderr, "--total needs about 1.1 PiB free under") {
		t.Fatalf("exit %d, want 2 and the free space needed\nstderr: %s", r.code, r.stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(b.data, "bench-relay-*")); len(left) != 0 {
		t.Errorf("scratch directories left: %v", left)
	}
}

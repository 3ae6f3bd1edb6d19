package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/internal/benchlab"
	"github.com/claimcheck/claimcheck/internal/cli"
)

// relayChild is the program, and the arguments before the global flags,
// that bench relay runs as the relay process: this executable (the
// claimcheck command tree with the lab's commands). Tests replace it with
// a built claimcheck-bench (a test binary cannot be re-run as the command).
var relayChild = func() (string, []string, error) {
	exe, err := os.Executable()
	return exe, nil, err
}

// The kind and tenant of the bench's outbox entries.
const (
	relayBenchKind   = "bench"
	relayBenchTenant = "bench"
)

// benchRelayOptions are the options of bench relay.
type benchRelayOptions struct {
	l                     *cli.Lab
	entries, small, batch int
	total                 string
	keep, untilEmpty      bool
	window                time.Duration
	windowSet             bool  // --window was given (even at its default)
	size                  int64 // each payload: --total / --entries, by Validate
}

// Validate checks the flags and the global ones bench relay needs: a
// --broker of its own, no --database but PostgreSQL's, no --store.
func (o *benchRelayOptions) Validate() error {
	l := o.l
	if l.Broker() == "" {
		return cli.UsageErrorf("bench relay needs --broker (or CLAIMCHECK_BROKER): a queue or stream of its own, deleted afterwards")
	}
	if d := l.Database(); d != "" && !strings.HasPrefix(d, "postgres://") && !strings.HasPrefix(d, "postgresql://") {
		return cli.UsageErrorf("bench relay makes a job database per backlog: leave --database unset (SQLite in each data directory) or give a postgres:// URL")
	}
	if l.Store() != "" {
		// Each backlog is a deployment of its own (key, job database,
		// store namespace): one store for both would hold the small
		// backlog's payloads, sealed under another key, when the large
		// one's deployment starts, which refuses it.
		return cli.UsageErrorf("bench relay keeps each backlog's payloads in a file store in its scratch data directory (the relay reads tickets, never payloads, so the store does not change what it measures): drop --store (and CLAIMCHECK_STORE)")
	}
	if o.entries < 1 || o.entries > 1_000_000 {
		return cli.UsageErrorf("--entries %d: use 1 to 1000000", o.entries)
	}
	if o.small < 1 || o.small > o.entries {
		return cli.UsageErrorf("--small %d: use 1 to --entries (%d)", o.small, o.entries)
	}
	if o.batch < 1 || o.batch > 10000 {
		return cli.UsageErrorf("--batch %d: use 1 to 10000", o.batch)
	}
	tot, err := humanize.ParseBytes(o.total)
	if err != nil || tot == 0 || tot > 1<<50 {
		return cli.UsageErrorf("--total %q: want a size such as 10GiB, 4MiB or 123456 bytes", o.total)
	}
	o.size = int64(tot) / int64(o.entries)
	if o.size < 1 {
		return cli.UsageErrorf("--total %s is less than a byte per entry (%d entries)", o.total, o.entries)
	}
	if o.untilEmpty && (o.windowSet || o.window != relayDefaultWindow) {
		return cli.UsageErrorf("--until-empty runs each relay until its backlog is sent, --window for a fixed time: give one of them")
	}
	if o.window < time.Second || o.window > time.Hour {
		return cli.UsageErrorf("--window %s: use 1s to 1h", o.window)
	}
	return nil
}

func newBenchRelay(l *cli.Lab) *cobra.Command {
	o := &benchRelayOptions{l: l}
	c := &cobra.Command{
		Use:   "relay --broker URL [--entries 10000] [--total 10GiB] [--small 10]",
		Short: "Measure the outbox relay's peak memory against the backlog",
		Long: `Measure the peak memory of the outbox relay (claimcheck relay --until-empty)
with a large backlog against a small one: --entries outbox entries whose
payloads total --total bytes, and --small entries of the same payload size
(--total / --entries each). It passes when the large backlog's peak RSS is at
most 10% above the small one's (the relay reads tickets, never payloads, and
holds at most --batch entries at once).

Each backlog gets a fresh data directory (job database, key and file store)
under a scratch directory in --data, removed afterwards unless --keep. The
bench checks the generated payloads in and enqueues them to the outbox of
--destination in its own process (always as objects, never inline; progress
on standard error). It then runs the relay
over each backlog as a separate process of this executable, as a service
would run: for --window (default 30 s, the same for both backlogs, long
enough to send the large one), then interrupted; and reads its peak RSS
from the kernel (ru_maxrss, Linux only). Equal windows keep start-up and
uptime out of the comparison: a relay that ran for 0.2 s has not yet done
what any running service does (River's maintenance, its polls, a first
garbage collection). The relay is started by a
launcher process that does nothing else, because Linux counts the starting
process's own peak RSS in a child's ru_maxrss: the table shows that floor,
and a sampled VmHWM of the relay as a cross-check. Entries per second are over
the window, not the relay's throughput; with --until-empty each relay runs
until its backlog is sent (claimcheck relay --until-empty) and entries per
second are its throughput, start-up included (the memory comparison then
compares runs of different lengths).

It uses a scratch queue: pass a queue/stream name of its own in --broker
(e.g. amqp://guest:guest@localhost:5672/?queue=cc-bench-relay or
nats://localhost:4222?stream=CC_BENCH_RELAY). After each measurement the
broker's queues or streams are deleted, with the messages the relay sent, so
that a re-run starts clean. Never point it at a queue in use.

The disk needs --total plus the small backlog free under --data: a larger
backlog is refused before anything is written. Each backlog has its own
SQLite job database in its data directory; with --database postgres://…/db, each gets a fresh PostgreSQL
database on that server instead (created next to db, dropped afterwards),
so the relay's process holds no database cache.`,
		Args: cli.ExactArgs(0, "no arguments"),
		RunE: l.RunE(o, func(cmd *cobra.Command, _ []string) { o.windowSet = cmd.Flags().Changed("window") }),
	}
	c.AddCommand(newBenchRelayMeasure(l))
	c.Flags().IntVar(&o.entries, "entries", benchlab.RelayDefaultEntries, "outbox entries of the large backlog")
	c.Flags().StringVar(&o.total, "total", "10GiB", "payload bytes of the large backlog, all entries together (e.g. 10GiB, 4MiB, 123456); each payload is total/entries")
	c.Flags().IntVar(&o.small, "small", benchlab.RelayDefaultSmall, "outbox entries of the small backlog it is compared with, each of the same payload size")
	c.Flags().IntVar(&o.batch, "batch", 100, "the relay's --batch: entries in flight at once")
	c.Flags().BoolVar(&o.untilEmpty, "until-empty", false, "run each relay until its backlog is sent instead of for --window: entries/s is then the relay's throughput")
	c.Flags().DurationVar(&o.window, "window", relayDefaultWindow, "how long each relay runs, as a service, before it is interrupted: the same for both backlogs, and long enough to send the large one")
	c.Flags().BoolVar(&o.keep, "keep", false, "keep the scratch data directories; the broker's queue is deleted all the same")
	return c
}

// relayDefaultWindow is --window's default.
const relayDefaultWindow = 30 * time.Second

type relayBench struct {
	// databases maps a phase to its PostgreSQL job database's URL (empty:
	// SQLite in the phase's data directory).
	databases map[string]string
	l         *cli.Lab
	stderr    io.Writer
	batch     int
	size      int64         // each payload
	window    time.Duration // each relay's run; 0: until its backlog is sent
}

func (rb *relayBench) run(ctx context.Context, data string, small, entries int, keep bool) (*benchlab.RelayReport, error) {
	l := rb.l
	tmp, err := os.MkdirTemp(data, "bench-relay-")
	if err != nil {
		return nil, fmt.Errorf("bench relay: %w", err)
	}
	defer func() {
		if keep {
			fmt.Fprintf(rb.stderr, "bench relay: kept %s\n", tmp)
			return
		}
		if err := os.RemoveAll(tmp); err != nil {
			fmt.Fprintf(rb.stderr, "bench relay: removing %s: %v\n", tmp, err)
		}
	}()
	rep := &benchlab.RelayReport{
		Broker: l.RedactedBroker(), Destination: l.Destination(), Store: "file store in each data directory", Batch: rb.batch, EntryBytes: rb.size,
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, NumCPU: runtime.NumCPU(),
		RSSMethod: benchlab.RSSMethodChild,
	}
	backlogs := []struct {
		name    string
		entries int
		seed    uint64
	}{
		{benchlab.RelayPhaseSmall, small, 1 << 40}, // seeds apart: no content is shared
		{benchlab.RelayPhaseLarge, entries, 0},
	}
	// The broker's queue is declared by the first open (in setup): delete
	// it however the bench ends.
	dirty := true
	defer func() {
		if dirty {
			rb.purge()
		}
	}()
	rb.databases = map[string]string{}
	if l.Database() != "" {
		drop, err := rb.createDatabases(ctx, l.Database(), benchlab.RelayPhaseSmall, benchlab.RelayPhaseLarge)
		defer drop()
		if err != nil {
			return nil, err
		}
		rep.Store += "; PostgreSQL job databases"
	}
	for _, b := range backlogs {
		dir := filepath.Join(tmp, b.name)
		p := benchlab.RelayPhase{Name: b.name, Entries: b.entries, PayloadBytes: int64(b.entries) * rb.size}
		if err := rb.setup(ctx, dir, &p, b.seed); err != nil {
			return nil, err
		}
		rep.Phases = append(rep.Phases, p)
	}
	for i := range rep.Phases {
		p := &rep.Phases[i]
		u, err := rb.measure(ctx, filepath.Join(tmp, p.Name), p)
		rb.purge()
		dirty = i+1 < len(rep.Phases) && err == nil
		if err != nil {
			return nil, err
		}
		if !u.MaxRSSOK {
			rep.RSSMethod = bench.RSSMethodNone
		}
		fmt.Fprintf(rb.stderr, "relay %s: %d entries sent in %.2f s (%.1f entries/s) in %d publish calls (%.3f per entry), peak RSS %.1f MiB (sampled %.1f MiB, floor %.1f MiB)\n",
			p.Name, p.Sent, p.Seconds, p.EntriesPerSec, p.PublishCalls, p.CallsPerEntry, float64(p.PeakRSS)/bench.MiB, float64(p.SampledHWM)/bench.MiB, float64(p.FloorRSS)/bench.MiB)
	}
	rep.Judge()
	return rep, nil
}

// setup checks p.Entries generated payloads into the data directory dir's
// file store and enqueues each to the outbox of --destination.
func (rb *relayBench) setup(ctx context.Context, dir string, p *benchlab.RelayPhase, seed uint64) error {
	// Always as objects, however small the payload; a broker that is down
	// or whose messages cannot carry the tickets fails now, not in the relay.
	ob, err := rb.l.OpenOutbox(ctx, dir, rb.databases[p.Name], relayBenchKind)
	if err != nil {
		return err
	}
	defer ob.Close()
	start := time.Now()
	for i := range p.Entries {
		if err := ob.Enqueue(ctx, relayBenchKind, relayBenchTenant, bench.Stream(seed+uint64(i), rb.size)); err != nil {
			return fmt.Errorf("bench relay: setup %s, entry %d: %w", p.Name, i+1, err)
		}
		if n := i + 1; n%1000 == 0 || n == p.Entries {
			s := time.Since(start).Seconds()
			fmt.Fprintf(rb.stderr, "setup %s: %d/%d entries, %s, %.1f MiB/s\n", p.Name, n, p.Entries,
				bench.FormatSizeApprox(int64(n)*rb.size), float64(int64(n)*rb.size)/bench.MiB/s)
		}
	}
	p.SetupSeconds = time.Since(start).Seconds()
	if p.SetupSeconds > 0 {
		p.SetupMiBPerSec = float64(p.PayloadBytes) / bench.MiB / p.SetupSeconds
	}
	fmt.Fprintf(rb.stderr, "setup %s: %d entries, %s in %.1f s (%.1f MiB/s)\n", p.Name, p.Entries, bench.FormatSizeApprox(p.PayloadBytes), p.SetupSeconds, p.SetupMiBPerSec)
	return nil
}

// measure runs `claimcheck relay --until-empty` over the data directory
// dir as a grandchild process, under `claimcheck bench relay measure`, and
// records what it sent, its time and its peak RSS. The launcher is there
// because Linux starts a child's ru_maxrss at its parent's peak RSS (see
// bench.ChildUsage.Floor): the bench's own, after the setup, is as high as
// the relay's, while the launcher's is only the executable's start-up.
// Credentials (broker URL, secret, keeper URL) go in the environment, not
// the command line.
func (rb *relayBench) measure(ctx context.Context, dir string, p *benchlab.RelayPhase) (bench.ChildUsage, error) {
	l := rb.l
	var u bench.ChildUsage
	exe, prefix, err := relayChild()
	if err != nil {
		return u, fmt.Errorf("bench relay: the relay's executable: %w", err)
	}
	usageFile := filepath.Join(dir, "relay-usage.json")
	relayArgs := append(slices.Clone(prefix), "--data", dir, "--destination", l.Destination(),
		"relay", "--batch", strconv.Itoa(rb.batch), "--json")
	if rb.window == 0 {
		relayArgs = append(relayArgs, "--until-empty")
	}
	args := append(slices.Clone(prefix), "bench", "relay", "measure", "--usage", usageFile, "--stop-after", rb.window.String(), "--", exe)
	args = append(args, relayArgs...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(),
		"CLAIMCHECK_BROKER="+l.Broker(),
		"CLAIMCHECK_STORE=",
		"CLAIMCHECK_SECRET="+l.Secret(),
		"CLAIMCHECK_KEEPER="+l.Keeper(),
		"CLAIMCHECK_DATABASE="+rb.databases[p.Name],
		"CLAIMCHECK_LOG_LEVEL="+l.LogLevel(),
	)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = rb.stderr
	cli.DieWithParent(cmd)
	fmt.Fprintf(rb.stderr, "relay %s: %s %s\n", p.Name, exe, strings.Join(relayArgs, " "))
	if err := cmd.Run(); err != nil {
		return u, fmt.Errorf("bench relay: the relay over the %s backlog: %w", p.Name, err)
	}
	b, err := os.ReadFile(usageFile)
	if err == nil {
		err = json.Unmarshal(b, &u)
	}
	if err != nil {
		return u, fmt.Errorf("bench relay: the relay's measurement: %w", err)
	}
	var out struct {
		Sent            *int64 `json:"sent"`
		FailedPublishes int64  `json:"failed_publishes"`
		PublishCalls    int64  `json:"publish_calls"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Sent == nil {
		return u, fmt.Errorf("bench relay: the relay over the %s backlog printed no sent count: %q", p.Name, stdout.String())
	}
	p.Sent, p.FailedPublishes, p.PublishCalls = *out.Sent, out.FailedPublishes, out.PublishCalls
	if p.Sent > 0 {
		p.CallsPerEntry = float64(p.PublishCalls) / float64(p.Sent)
	}
	p.SetUsage(u)
	if p.Sent != int64(p.Entries) {
		return u, fmt.Errorf("bench relay: the relay over the %s backlog sent %d entries, want %d", p.Name, p.Sent, p.Entries)
	}
	return u, nil
}

// purge deletes the broker's queues or streams, with the messages the
// relay sent, where the transport can.
func (rb *relayBench) purge() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := broker.DeleteTopology(ctx, rb.l.Broker())
	if err != nil {
		fmt.Fprintf(rb.stderr, "bench relay: could not delete the broker's queue (%v): if the bench made it, purge %s yourself\n", err, rb.l.RedactedBroker())
	}
}

// createDatabases makes a fresh PostgreSQL database per backlog on the
// server of base (named after base's database, the phase and the time),
// records their URLs in rb.databases, and returns a function dropping them.
func (rb *relayBench) createDatabases(ctx context.Context, base string, phases ...string) (func(), error) {
	u, err := url.Parse(base)
	if err != nil {
		return func() {}, cli.UsageErrorf("--database: not a URL")
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		return func() {}, fmt.Errorf("bench relay: %w", err)
	}
	var names []string
	drop := func() {
		for _, n := range names {
			if _, err := db.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+n+" WITH (FORCE)"); err != nil {
				fmt.Fprintf(rb.stderr, "bench relay: drop database %s: %v\n", n, err)
			}
		}
		db.Close()
	}
	stem := strings.ToLower(strings.Trim(u.Path, "/"))
	if stem == "" || !isIdent(stem) {
		stem = "claimcheck"
	}
	for _, ph := range phases {
		n := fmt.Sprintf("%s_bench_relay_%s_%d", stem, ph, time.Now().UnixNano())
		if _, err := db.ExecContext(ctx, "CREATE DATABASE "+n); err != nil {
			return drop, fmt.Errorf("bench relay: create database %s: %w", n, err)
		}
		names = append(names, n)
		v := *u
		v.Path = "/" + n
		rb.databases[ph] = v.String()
	}
	return drop, nil
}

// isIdent reports whether s is a plain lowercase SQL identifier.
func isIdent(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return len(s) <= 30
}

// Run is bench relay: both backlogs set up, each relayed by a child
// process, the report printed as a table or JSON.
func (o *benchRelayOptions) Run(ctx context.Context, s cli.Streams) error {
	l := o.l
	// Both backlogs' payloads stay in their file stores until the end.
	data, err := l.BenchData(uint64(o.entries+o.small)*uint64(o.size), "--total")
	if err != nil {
		return err
	}
	rb := &relayBench{l: l, stderr: s.Err, batch: o.batch, size: o.size, window: o.window}
	if o.untilEmpty {
		rb.window = 0
	}
	rep, err := rb.run(ctx, data, o.small, o.entries, o.keep)
	if err != nil {
		return err
	}
	if err := l.PrintReport(s.Out, rep); err != nil {
		return err
	}
	if !rep.Passed() {
		return fmt.Errorf("bench relay: %s (ratio %.3f, limit %.2f)", rep.Detail, rep.Ratio, rep.MaxRatio)
	}
	return nil
}

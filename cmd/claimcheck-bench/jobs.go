package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/benchlab"
	"github.com/claimcheck/claimcheck/internal/cli"
	"github.com/claimcheck/claimcheck/internal/dbopen"
)

// benchJobsOptions are the options claimcheck-bench adds to claimcheck's
// bench jobs (--compare, --rounds, --cpuprofile-dir, --no-sqlite), with
// its --jobs, --latency-jobs and --size.
type benchJobsOptions struct {
	l               *cli.Lab
	jobs, latency   int
	jobsSet         bool // --jobs was given (--compare's default is benchlab.DefaultCompareJobs)
	rounds          int
	size            string
	compare, noLite bool
	bytes           int64 // --size parsed by Validate
	profile         string
}

// Validate checks that --compare is given (the other flags are its),
// --jobs (1 to 1,000,000), --latency-jobs (1 to 10,000), --rounds (1 to
// 20), --size (1 B to the 64 KiB inline threshold), and that --database,
// if set, is a PostgreSQL URL (SQLite is always a scratch file of its
// own).
func (o *benchJobsOptions) Validate() error {
	if !o.compare {
		return cli.UsageErrorf("--rounds, --cpuprofile-dir and --no-sqlite are for --compare")
	}
	if !o.jobsSet {
		o.jobs = benchlab.DefaultCompareJobs
	}
	if o.jobs < 1 || o.jobs > 1_000_000 {
		return cli.UsageErrorf("--jobs %d: use 1 to 1000000", o.jobs)
	}
	if o.latency < 1 || o.latency > 10_000 {
		return cli.UsageErrorf("--latency-jobs %d: use 1 to 10000", o.latency)
	}
	if o.rounds < 1 || o.rounds > 20 {
		return cli.UsageErrorf("--rounds %d: use 1 to 20", o.rounds)
	}
	n, err := humanize.ParseBytes(o.size)
	if err != nil || n == 0 || n > 64<<10 {
		return cli.UsageErrorf("--size %q: want a size between 1 B and 64 KiB such as 4KiB", o.size)
	}
	o.bytes = int64(n)
	if d := o.l.Database(); d != "" && !strings.HasPrefix(d, "postgres://") && !strings.HasPrefix(d, "postgresql://") {
		return cli.UsageErrorf("bench jobs --compare uses a scratch SQLite file of its own: leave --database unset, or give a postgres:// URL to measure PostgreSQL too")
	}
	if o.noLite && o.l.Database() == "" {
		return cli.UsageErrorf("--no-sqlite needs --database postgres://…")
	}
	return nil
}

// addJobsCompare adds --compare, --rounds, --cpuprofile-dir and
// --no-sqlite to claimcheck's bench jobs j: with --compare, j runs the
// comparison with plain River instead of its own measurement.
func addJobsCompare(j *cobra.Command, l *cli.Lab) {
	o := &benchJobsOptions{l: l}
	j.Long += `

With --compare (claimcheck-bench only), claimcheck's job pipeline is
measured against plain River with the payload in its args, in this process
and run, on a scratch SQLite file in the data directory and, with
--database postgres://…, on that PostgreSQL database too (both sides share
its River tables under queues of their own; the bench deletes their jobs
after each case), each on a scratch file store with a local keeper. Per
database: enqueue (--jobs, default 10000, one at a time, against as many
River Inserts), work (4 workers each side; CPU ms per job) and latency
(--latency-jobs one at a time; median ms from the enqueue to the
handler). The cases' order is reversed every other round (--rounds,
default 3); each ratio is printed per round with its median and min–max,
next to the load average as each round started, and judged against the
project's goals (enqueue ≥ 0.9, CPU ≤ 1.2, p50 ≤ 1.2 × River). --database
is connected to first: nothing is measured when it cannot be.`
	j.Flags().BoolVar(&o.compare, "compare", false, "compare with plain River (payload in its args) in this run; --jobs defaults to 10000")
	j.Flags().IntVar(&o.rounds, "rounds", 3, "with --compare, rounds per database, the order of the cases reversed every other round")
	j.Flags().StringVar(&o.profile, "cpuprofile-dir", "", "with --compare, write CPU profiles (go tool pprof) of the first round of claimcheck's enqueue and work cases and plain River's work case into this directory: sqlite-enqueue.pprof, sqlite-work.pprof, sqlite-river-work.pprof, postgres-…")
	j.Flags().BoolVar(&o.noLite, "no-sqlite", false, "with --compare and --database, measure PostgreSQL only")
	own := j.RunE
	compare := l.RunE(o, func(cmd *cobra.Command, _ []string) {
		f := cmd.Flags()
		o.jobs, _ = f.GetInt("jobs")
		o.jobsSet = f.Changed("jobs")
		o.latency, _ = f.GetInt("latency-jobs")
		o.size, _ = f.GetString("size")
	})
	j.RunE = func(cmd *cobra.Command, args []string) error {
		f := cmd.Flags()
		if !o.compare && !f.Changed("rounds") && o.profile == "" && !o.noLite {
			return own(cmd, args)
		}
		return compare(cmd, args)
	}
}

// Run is bench jobs --compare: claimcheck's job pipeline against plain
// River (benchlab.CompareJobs) on each database, printed as a table or JSON.
func (o *benchJobsOptions) Run(ctx context.Context, s cli.Streams) error {
	data, err := o.l.BenchData(0, "")
	if err != nil {
		return err
	}
	var dbs []string
	if !o.noLite {
		dbs = append(dbs, "")
	}
	if o.l.Database() != "" {
		// Now, not after the SQLite half has run for minutes.
		if err := checkDatabase(ctx, o.l.Database()); err != nil {
			return err
		}
		dbs = append(dbs, o.l.Database())
	}
	cfg := benchlab.JobsCompareConfig{Databases: dbs, Dir: data, Jobs: o.jobs, LatencyJobs: o.latency,
		Size: o.bytes, Rounds: o.rounds, Log: s.Err}
	if cfg.ProfileDir, err = profileDir(o.profile); err != nil {
		return err
	}
	rep, err := benchlab.CompareJobs(ctx, cfg)
	if err != nil {
		return err
	}
	if err := o.l.PrintReport(s.Out, rep); err != nil {
		return err
	}
	if !rep.Passed() {
		return fmt.Errorf("bench jobs --compare: a goal was not met (see the table)")
	}
	return nil
}

// checkDatabase opens the PostgreSQL database of --database and closes it:
// an unreachable server, a missing database or refused credentials are
// reported before anything is measured.
func checkDatabase(ctx context.Context, database string) error {
	t, err := dbopen.Parse(database)
	if err != nil {
		return cli.UsageErrorf("--database: %v", err)
	}
	db, err := dbopen.Open(ctx, t, &dbopen.Options{MaxConns: 1})
	if err != nil {
		return fmt.Errorf("bench: --database: %w (nothing was measured; the database must exist: CREATE DATABASE)", err)
	}
	return db.Close()
}

package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/internal/benchlab"
	"github.com/claimcheck/claimcheck/internal/cli"
)

// workloadCompareOptions are the options claimcheck-bench adds to
// claimcheck's bench workload (--compare, --rounds), with its --jobs,
// --mix, --seed, --producers and --workers.
type workloadCompareOptions struct {
	l                  *cli.Lab
	compare            bool
	rounds             int
	jobs               int
	mix                string
	seed               uint64
	producers, workers int
	rate               float64
	parsed             bench.Mix // --mix parsed by Validate
}

// Validate checks that --compare is given with --rounds, --rounds (1 to
// 20), and bench workload's own flags as it does (--jobs 1 to 1,000,000,
// --mix, --producers and --workers 1 to 256, --rate 0 to 100,000).
func (o *workloadCompareOptions) Validate() error {
	if !o.compare {
		return cli.UsageErrorf("--rounds is for --compare")
	}
	if o.rounds < 1 || o.rounds > 20 {
		return cli.UsageErrorf("--rounds %d: use 1 to 20", o.rounds)
	}
	if o.jobs < 1 || o.jobs > 1_000_000 {
		return cli.UsageErrorf("--jobs %d: use 1 to 1000000", o.jobs)
	}
	m, err := bench.ParseMix(o.mix)
	if err != nil {
		return cli.UsageErrorf("--mix: %v", err)
	}
	o.parsed = m
	if o.producers < 1 || o.producers > 256 {
		return cli.UsageErrorf("--producers %d: use 1 to 256", o.producers)
	}
	if o.workers < 1 || o.workers > 256 {
		return cli.UsageErrorf("--workers %d: use 1 to 256", o.workers)
	}
	if !(o.rate >= 0 && o.rate <= 100_000) {
		return cli.UsageErrorf("--rate %g: use 0 (as fast as the producers go) to 100000 jobs/s", o.rate)
	}
	return nil
}

// addWorkloadCompare adds --compare and --rounds to claimcheck's bench
// workload w: with --compare, w runs the comparison
// (benchlab.CompareWorkload) instead of its own measurement.
func addWorkloadCompare(w *cobra.Command, l *cli.Lab) {
	o := &workloadCompareOptions{l: l}
	w.Long += `

With --compare (claimcheck-bench only), the same workload also runs, in
this process and run, alternated per round (--rounds, default 5; the order
of the cases reversed every other round), through plain River with the
payload inline in its args (same job database, same producers and
workers, the same --rate) and through the store's plain SDK moving the
same bytes at the same concurrency (s3://: the AWS SDK's upload by the producers and
GetObject by the workers; file://: plain file writes with fsync and
reads). Each ratio is printed per round with its median and min–max next
to the load average as each round started: claimcheck's jobs/s and MiB/s
against the SDK's (goal ≥ 0.8), its p50/p95/p99 latency and job-table
bytes per job against River inline's (goal: p99 ≤ River's).`
	w.Flags().BoolVar(&o.compare, "compare", false, "also run plain River (payload inline) and the store's plain SDK, alternated per round; print the ratios")
	w.Flags().IntVar(&o.rounds, "rounds", 5, "with --compare, rounds, the order of the cases reversed every other round")
	own := w.RunE
	compare := l.RunE(o, func(cmd *cobra.Command, _ []string) {
		f := cmd.Flags()
		o.jobs, _ = f.GetInt("jobs")
		o.mix, _ = f.GetString("mix")
		o.seed, _ = f.GetUint64("seed")
		o.producers, _ = f.GetInt("producers")
		o.workers, _ = f.GetInt("workers")
		o.rate, _ = f.GetFloat64("rate")
	})
	w.RunE = func(cmd *cobra.Command, args []string) error {
		if !o.compare && !cmd.Flags().Changed("rounds") {
			return own(cmd, args)
		}
		return compare(cmd, args)
	}
}

// Run is bench workload --compare on the deployment of the global flags
// (cli.Lab.OpenBench), printed as a table or JSON.
func (o *workloadCompareOptions) Run(ctx context.Context, s cli.Streams) (err error) {
	data, err := o.l.BenchData(0, "")
	if err != nil {
		return err
	}
	d, err := o.l.OpenBench(ctx, data)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := d.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = cerr
		}
	}()
	rep, err := benchlab.CompareWorkload(ctx, benchlab.WorkloadCompareConfig{Pipeline: d.Pipeline, Database: d.Database, Store: d.Store, Dir: data,
		Jobs: o.jobs, Mix: o.parsed, Seed: o.seed, Producers: o.producers, Workers: o.workers, Rate: o.rate, Rounds: o.rounds, Log: s.Err})
	if err != nil {
		return err
	}
	if err := o.l.PrintReport(s.Out, rep); err != nil {
		return err
	}
	if !rep.Passed() {
		return fmt.Errorf("bench workload --compare: a goal was not met (see the table)")
	}
	return nil
}

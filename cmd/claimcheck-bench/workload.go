package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/benchlab"
	"github.com/claimcheck/claimcheck/internal/cli"
)

// workloadCompareOptions are the options claimcheck-bench adds to
// claimcheck's bench workload (--compare, --rounds), with bench workload's
// own flags (cli.WorkloadFlags, validated as bench workload validates
// them).
type workloadCompareOptions struct {
	l       *cli.Lab
	compare bool
	rounds  int
	profile string
	cli.WorkloadFlags
}

// Validate checks that --compare is given with --rounds and
// --cpuprofile-dir, --rounds (1 to 20), and bench workload's own flags
// (cli.WorkloadFlags.Validate).
func (o *workloadCompareOptions) Validate() error {
	if !o.compare {
		return cli.UsageErrorf("--rounds and --cpuprofile-dir are for --compare")
	}
	if o.rounds < 1 || o.rounds > 20 {
		return cli.UsageErrorf("--rounds %d: use 1 to 20", o.rounds)
	}
	return o.WorkloadFlags.Validate()
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
	w.Flags().StringVar(&o.profile, "cpuprofile-dir", "", "with --compare, write a CPU profile (go tool pprof) of the first round of claimcheck's case into this directory: sqlite-workload.pprof or postgres-workload.pprof")
	own := w.RunE
	compare := l.RunE(o, func(cmd *cobra.Command, _ []string) { o.Bind(cmd) })
	w.RunE = func(cmd *cobra.Command, args []string) error {
		if !o.compare && !cmd.Flags().Changed("rounds") && o.profile == "" {
			return own(cmd, args)
		}
		return compare(cmd, args)
	}
}

// Run is bench workload --compare on the deployment of the global flags
// (cli.Lab.OpenBench), printed as a table or JSON.
func (o *workloadCompareOptions) Run(ctx context.Context, s cli.Streams) (err error) {
	prof, err := profileDir(o.profile)
	if err != nil {
		return err
	}
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
	cfg := benchlab.WorkloadCompareConfig{Pipeline: d.Pipeline, Database: d.Database, Store: d.Store, Dir: data,
		Jobs: o.Jobs, Mix: o.Parsed, Seed: o.Seed, Producers: o.Producers, Workers: o.Workers, Rate: o.Rate, Rounds: o.rounds, Log: s.Err,
		ProfileDir: prof}
	rep, err := benchlab.CompareWorkload(ctx, cfg)
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

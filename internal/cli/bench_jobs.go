package cli

import (
	"context"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/bench"
)

// benchJobsOptions are the options of bench jobs.
type benchJobsOptions struct {
	g             *globals
	jobs, latency int
	workers       int
	size          string
	bytes         int64 // --size parsed by Validate
}

// Validate checks --jobs (1 to 1,000,000), --latency-jobs (1 to 10,000),
// --workers (1 to 256) and --size (1 B to 64 KiB).
func (o *benchJobsOptions) Validate() error {
	if o.jobs < 1 || o.jobs > 1_000_000 {
		return usagef("--jobs %d: use 1 to 1000000", o.jobs)
	}
	if o.latency < 1 || o.latency > 10_000 {
		return usagef("--latency-jobs %d: use 1 to 10000", o.latency)
	}
	if o.workers < 1 || o.workers > 256 {
		return usagef("--workers %d: use 1 to 256", o.workers)
	}
	n, err := humanize.ParseBytes(o.size)
	if err != nil || n == 0 || n > 64<<10 {
		return usagef("--size %q: want a size between 1 B and 64 KiB such as 4KiB", o.size)
	}
	o.bytes = int64(n)
	return nil
}

func newBenchJobs(g *globals) *cobra.Command {
	o := &benchJobsOptions{g: g}
	c := &cobra.Command{
		Use:   "jobs [--jobs 2000] [--size 4KiB] [--workers 4]",
		Short: "Enqueue and work small jobs through --database and --store; print ms per job, CPU and memory",
		Long: `Measure small jobs through this deployment's job database (--database;
default a scratch SQLite file in the data directory) and store (--store;
default a scratch file store there), from here, with the global flags'
store settings (encryption, inline threshold), in three phases:

  enqueue   --jobs enqueues of --size payloads, one at a time (check-in,
            then the job in its transaction): ms per job, jobs/s;
  work      those --jobs waiting jobs worked by --workers at once, each
            payload claimed and verified, then read by the handler: ms per
            job and jobs/s from the workers' start to the last handler;
  latency   --latency-jobs jobs enqueued one at a time, each once the
            previous one reached its handler: p50/p95/p99 ms from the start
            of the enqueue to the handler, and from the handler's start to
            the attempt's outcome.

Each phase prints this process's CPU ms per job and its peak memory
(resident set, RssAnon, Go heap), beside the load average. On --store the
bench works under a namespace of its own (prefix=…/claimcheck-bench-…/),
deleted afterwards; on --database under a kind of its own (bench-jobs),
whose jobs are deleted afterwards.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	c.Flags().IntVar(&o.jobs, "jobs", bench.DefaultJobs, "jobs per enqueue and work phase")
	c.Flags().IntVar(&o.latency, "latency-jobs", bench.DefaultLatencyJobs, "jobs of the latency phase, one at a time")
	c.Flags().IntVar(&o.workers, "workers", bench.DefaultJobWorkers, "jobs worked at once")
	c.Flags().StringVar(&o.size, "size", "4KiB", "each job's payload, at most 64 KiB")
	return c
}

func (o *benchJobsOptions) run(ctx context.Context, s streams) (err error) {
	data, err := benchData(o.g, 0, "")
	if err != nil {
		return err
	}
	b, err := openBenchEnv(ctx, o.g, data)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := b.close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = cerr
		}
	}()
	rep, err := bench.Jobs(ctx, bench.JobsConfig{Pipeline: b.pipe, Database: b.database, Store: b.store,
		Jobs: o.jobs, LatencyJobs: o.latency, Size: o.bytes, Workers: o.workers, Log: s.err})
	if err != nil {
		return err
	}
	return printReport(s.out, o.g.json, rep)
}

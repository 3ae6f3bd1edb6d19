package cli

import (
	"context"
	"slices"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/bench"
)

// WorkloadFlags are bench workload's own flags, shared with the team's
// claimcheck-bench, whose --compare runs the same workload beside its
// references: one definition and one validation of each.
type WorkloadFlags struct {
	Jobs               int
	Mix                string
	Seed               uint64
	Producers, Workers int
	Rate               float64   // jobs/s at most; 0: as fast as the producers go
	Parsed             bench.Mix // Mix parsed by Validate
}

// Validate checks --jobs (1 to 1,000,000), --mix (bench.ParseMix),
// --producers and --workers (1 to 256 each), --rate (0 to 100,000): a
// usage error (exit 2) names the flag.
func (w *WorkloadFlags) Validate() error {
	if w.Jobs < 1 || w.Jobs > 1_000_000 {
		return usagef("--jobs %d: use 1 to 1000000", w.Jobs)
	}
	m, err := bench.ParseMix(w.Mix)
	if err != nil {
		return usagef("--mix: %v", err)
	}
	w.Parsed = m
	if w.Producers < 1 || w.Producers > 256 {
		return usagef("--producers %d: use 1 to 256", w.Producers)
	}
	if w.Workers < 1 || w.Workers > 256 {
		return usagef("--workers %d: use 1 to 256", w.Workers)
	}
	if !(w.Rate >= 0 && w.Rate <= 100_000) {
		return usagef("--rate %g: use 0 (as fast as the producers go) to 100000 jobs/s", w.Rate)
	}
	return nil
}

// Config is the workload of these flags, for bench.Workload.
func (w *WorkloadFlags) Config() bench.WorkloadConfig {
	return bench.WorkloadConfig{Jobs: w.Jobs, Mix: w.Parsed, Seed: w.Seed, Producers: w.Producers, Workers: w.Workers, Rate: w.Rate}
}

// Bind reads the flags' values from c, where bench workload defined them
// (claimcheck-bench's --compare runs in place of bench workload's own Run).
func (w *WorkloadFlags) Bind(c *cobra.Command) {
	f := c.Flags()
	w.Jobs, _ = f.GetInt("jobs")
	w.Mix, _ = f.GetString("mix")
	w.Seed, _ = f.GetUint64("seed")
	w.Producers, _ = f.GetInt("producers")
	w.Workers, _ = f.GetInt("workers")
	w.Rate, _ = f.GetFloat64("rate")
}

// benchWorkloadOptions are the options of bench workload.
type benchWorkloadOptions struct {
	g *globals
	WorkloadFlags
}

func newBenchWorkload(g *globals) *cobra.Command {
	o := &benchWorkloadOptions{g: g}
	c := &cobra.Command{
		Use:   "workload [--jobs 2000] [--mix 90%:1B-64KiB,…] [--producers 2] [--workers 2]",
		Short: "Run a fixed number of jobs of a size mix through --database and --store; print jobs/s, MiB/s, latency, table bytes, memory",
		Long: `Run --jobs jobs whose payload sizes are drawn from --mix (seeded by --seed:
the same seed, the same sizes) through this deployment's job database
(--database; default a scratch SQLite file in the data directory) and
store (--store; default a scratch file store there), with the global
flags' store settings: --producers goroutines enqueue (check-in, then the
job) while --workers jobs are worked at once, each handler reading its
verified payload to the end and discarding it. The payloads are
generated as they are read (a seeded pseudo-random stream each), so even
40 MiB ones are neither held in memory nor written to disk first.

--mix is a list of buckets PERCENT%:MIN-MAX (sizes uniform from MIN to
MAX bytes) or PERCENT%:SIZE, adding up to 100%; the default is the
articles' document jobs, mostly small with a slow tail to 40 MiB.

It prints jobs/s and payload MiB/s from the first enqueue to the last
handler, p50/p95/p99 enqueue → handler latency (as fast as the producers
go, it includes the wait in the queue they fill; --rate paces the
arrivals, so a rate below what the workers take measures the latency
alone), the job table's bytes per
job (PostgreSQL: pg_column_size of the jobs' rows and their registry rows;
SQLite: the tables' pages, after minus before), CPU per job and this
process's peak RssAnon and resident set, beside the load average. Payloads
at most the inline threshold travel in their tickets (--inline-threshold,
--always-offload). On --store the bench works under a namespace of its own
(prefix=…/claimcheck-bench-…/), deleted afterwards; on --database under a
kind of its own, whose jobs are deleted afterwards.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	c.Flags().IntVar(&o.Jobs, "jobs", bench.DefaultWorkloadJobs, "jobs to enqueue and work")
	c.Flags().StringVar(&o.Mix, "mix", bench.DefaultMix, "payload size distribution: PERCENT%:MIN-MAX or PERCENT%:SIZE buckets, comma-separated, adding up to 100%")
	c.Flags().Uint64Var(&o.Seed, "seed", 1, "seed of the sizes drawn from --mix")
	c.Flags().IntVar(&o.Producers, "producers", bench.DefaultWorkloadProducers, "goroutines enqueueing at once")
	c.Flags().IntVar(&o.Workers, "workers", bench.DefaultWorkloadWorkers, "jobs worked at once")
	c.Flags().Float64Var(&o.Rate, "rate", 0, "jobs enqueued per second at most (an arrival rate below what the workers take measures latency without a queue); 0: as fast as the producers go")
	return c
}

// diskNeed is about the most bench workload writes under --data, in
// bytes: every payload once on the scratch file store (its objects stay
// until the end), plus a verified claim's spool per worker, each up to
// the largest size.
func (o *benchWorkloadOptions) diskNeed() uint64 {
	sizes := o.Parsed.Sizes(o.Seed, o.Jobs)
	need := uint64(o.Workers) * uint64(slices.Max(sizes))
	if o.g.store == "" {
		for _, n := range sizes {
			need += uint64(n)
		}
	}
	return need
}

func (o *benchWorkloadOptions) run(ctx context.Context, s streams) (err error) {
	data, err := benchData(o.g, o.diskNeed(), "--jobs")
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
	cfg := o.Config()
	cfg.Pipeline, cfg.Database, cfg.Store, cfg.Log = b.pipe, b.database, b.store, s.err
	rep, err := bench.Workload(ctx, cfg)
	if err != nil {
		return err
	}
	return printReport(s.out, o.g.json, rep)
}

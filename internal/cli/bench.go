package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/bench"
)

// benchOptions are the options of bench.
type benchOptions struct {
	g      *globals
	sizes  []string
	rounds int
	bytes  []int64 // --size parsed by Validate
}

// Validate checks --rounds (1 to 20) and each --size (1 B to 64 GiB).
func (o *benchOptions) Validate() error {
	if o.rounds < 1 || o.rounds > 20 {
		return usagef("--rounds %d: use 1 to 20", o.rounds)
	}
	o.bytes = nil
	for _, s := range o.sizes {
		n, err := humanize.ParseBytes(s)
		if err != nil || n == 0 || n > 64<<30 {
			return usagef("--size %q: want a size between 1 B and 64 GiB such as 4MiB or 1GiB", s)
		}
		o.bytes = append(o.bytes, int64(n))
	}
	return nil
}

func newBench(g *globals) *cobra.Command {
	o := &benchOptions{g: g}
	c := &cobra.Command{
		Use:   "bench [--size 4MiB --size 1GiB]",
		Short: "Check in and claim generated streams; print throughput and peak memory",
		Long: `Check in, then claim (verified and streaming), a generated pseudo-random
stream of each size, in this process, and print seconds, MiB/s and peak memory
(resident set from /proc/self/status VmHWM, reset between phases; Go heap).
Each size runs unencrypted and encrypted (a local keeper), and the
encrypted throughput is compared with the unencrypted in the same run. It
passes when the largest size peaks under 64 MiB and within 16 MiB of the
smallest, and encrypted throughput is at least 75% of unencrypted. The store
is a file store in the data directory unless --store is given; the data
written is removed afterwards.

On an s3:// store the limit is 64 MiB plus the upload's part buffers (part
size × parts in flight).

Sizes the data directory's disk cannot hold are refused before anything is
written: the largest once.

bench jobs and bench workload measure jobs through the job database and
the store (see their help).

The comparisons with plain references (bench --compare, bench jobs
--compare, bench workload --compare, bench relay) are the team's instrument, in the claimcheck-bench
command built from this repository (docs/development.md).`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	c.AddCommand(newBenchJobs(g), newBenchWorkload(g))
	c.Flags().StringArrayVar(&o.sizes, "size", nil, "payload size, e.g. 4MiB, 1GiB, 123456 (repeatable; default 4MiB and 1GiB)")
	c.Flags().IntVar(&o.rounds, "rounds", 1, "rounds per size: bench reports each variant's fastest round (steadier on a busy machine)")
	return c
}

// benchData is a bench command's data directory: --data made absolute,
// created and checked writable (ensureWritable), and, when need > 0, with
// need bytes free (ensureFree; flag is what decides need, for the message).
func benchData(g *globals, need uint64, flag string) (string, error) {
	data, err := filepath.Abs(g.data)
	if err != nil {
		return "", err
	}
	if err := ensureWritable(data); err != nil {
		return "", err
	}
	if need > 0 {
		if err := ensureFree(data, need, flag); err != nil {
			return "", err
		}
	}
	return data, nil
}

// diskNeed is about the most bench writes under --data at once, in bytes:
// the largest size once (its object, or a spool). Measured, du -sb of
// --data every 0.1 s: bench --size 1GiB 1024 MiB at most.
func (o *benchOptions) diskNeed() uint64 {
	sizes := o.bytes
	if len(sizes) == 0 {
		sizes = bench.DefaultSizes
	}
	return uint64(slices.Max(sizes))
}

// printReport prints a bench report as a table, or as JSON with --json.
func printReport(w io.Writer, asJSON bool, rep interface {
	JSON() ([]byte, error)
	Write(io.Writer) error
}) error {
	if !asJSON {
		return rep.Write(w)
	}
	b, err := rep.JSON()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func (o *benchOptions) run(ctx context.Context, s streams) error {
	g := o.g
	data, err := benchData(g, o.diskNeed(), "--size")
	if err != nil {
		return err
	}
	cfg := bench.Config{StoreURL: g.store, Log: s.err}
	cfg.Dir, cfg.Rounds, cfg.Sizes, cfg.Baseline = data, o.rounds, o.bytes, g.benchBaseline
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if err := printReport(s.out, g.json, rep); err != nil {
		return err
	}
	if !rep.Passed() {
		return fmt.Errorf("bench: a check failed (see the table)")
	}
	return nil
}

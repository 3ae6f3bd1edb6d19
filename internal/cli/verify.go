package cli

import (
	"context"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/ops"
	"github.com/claimcheck/claimcheck/sweep"
)

// verifyOptions are the options of verify.
type verifyOptions struct {
	g      *globals
	grace  string
	sizes  []string
	sample int
	opts   ops.VerifyOptions // the flags parsed by Validate
}

// Validate parses --grace (at least the sweeper's minimum) and each --size
// (1 B to 1 GiB).
func (o *verifyOptions) Validate() error {
	opts := ops.VerifyOptions{Sample: o.sample}
	var err error
	if opts.SweepGrace, err = claimcheck.ParseDuration(o.grace); err != nil {
		return usagef("--grace: %v", err)
	}
	if opts.SweepGrace < sweep.MinGrace {
		return usagef("--grace %s is below the sweeper's minimum of %s", o.grace, claimcheck.FormatDuration(sweep.MinGrace))
	}
	for _, s := range o.sizes {
		n, err := humanize.ParseBytes(s)
		if err != nil || n == 0 || n > 1<<30 {
			return usagef("--size %q: want a size between 1 B and 1 GiB such as 70KiB or 16MiB", s)
		}
		opts.ProbeSizes = append(opts.ProbeSizes, int64(n))
	}
	if o.sample <= 0 {
		opts.Sample = -1 // none
	}
	o.opts = opts
	return nil
}

func newVerify(g *globals) *cobra.Command {
	o := &verifyOptions{g: g}
	c := &cobra.Command{
		Use:   "verify [--grace 24h] [--size 70KiB --size 1MiB --size 16MiB] [--sample 100]",
		Short: "Run the four live checks of the Claim-Check pattern against this deployment",
		Long: `Run, against the deployment the global flags name, the four checks the seed
article lists under Verification, and print a report; exit 1 if any fails:

  uniform tickets                probes of 70 KiB, 1 MiB and 16 MiB (--size) are
                                 enqueued: every ticket is at most 512 bytes and
                                 their messages are within 256 bytes of each other;
                                 up to --sample existing offloaded tickets are
                                 checked against the 512-byte budget too
  missing payload dead-letters   a probe whose object is deleted behind its job
                                 is cancelled on attempt 1 as payload-missing
                                 (worked here, by an internal handler)
  oldest dead letter readable    the oldest dead letter's payload still exists
                                 and can be read (none: a pass with a note)
  orphan swept                   an object checked in without a job is deleted by
                                 the sweeper (restricted to the probe tenant's
                                 prefix, run as if --grace plus an hour later)

Probes are checked in under tenant claimcheck-verify and enqueued as kind
claimcheck-verify, a queue no worker serves; verify deletes its jobs (and
their claims-registry rows) and objects when done, and says what it could
not.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	f := c.Flags()
	f.StringVar(&o.grace, "grace", claimcheck.FormatDuration(sweep.DefaultGrace), "the grace period the deployment's sweeper runs with")
	f.StringArrayVar(&o.sizes, "size", nil, "probe payload size for the uniform-ticket check (repeatable; default 70KiB, 1MiB and 16MiB)")
	f.IntVar(&o.sample, "sample", 100, "existing offloaded tickets also checked against the budget (0: none)")
	return c
}

func (o *verifyOptions) run(ctx context.Context, s streams) error {
	g, opts := o.g, o.opts
	e, err := g.open(ctx, openOptions{})
	if err != nil {
		return err
	}
	defer e.Close()
	opts.Pipeline = e.pipe
	rep, err := ops.Verify(ctx, opts)
	if err != nil {
		return err
	}
	return finishChecks(s.out, g.json, "verify", rep)
}

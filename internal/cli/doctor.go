package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/ops"
	"github.com/claimcheck/claimcheck/pipeline"
)

// doctorOptions are the options of doctor.
type doctorOptions struct {
	g  *globals
	in retentionFlags
	r  *claimcheck.Retention // the sum, made by Validate
}

// Validate adds up the retention flags.
func (o *doctorOptions) Validate() (err error) {
	o.r, err = o.in.compute(o.g.maxAttempts)
	return err
}

func newDoctor(g *globals) *cobra.Command {
	o := &doctorOptions{g: g}
	c := &cobra.Command{
		Use:   "doctor [--backlog D] [--retry-window D] [--dead-letter D] [--replay-margin D] [--results-extra D]",
		Short: "Check the live configuration and print a pass/fail table",
		Long: `Read the configuration every command uses (--store, --database, --keeper,
--secret, --inline-threshold, ...) and check what it relies on, printing one
line per check; exit 1 if any fails:

  store                  a probe is written under payloads/claimcheck-doctor/
                         and results/claimcheck-doctor/, read back verified,
                         and deleted
  credentials            the credentials in use can read what workers read
                         (access denied is reported as such: a configuration
                         failure, not a missing payload)
  keeper                 an encrypted probe is checked in and claimed back:
                         the keeper wraps and unwraps a data key
  deployment key         the keeper unwraps the data key of an existing
                         sealed object of the store (one per key id): a
                         host with another key, or none, fails naming the
                         key id it needs (share it with claimcheck keys)
  retention              the minimum lifetimes, from the same flags as
                         "claimcheck retention"
  expiry payloads/       S3: the bucket's actual lifecycle rules expire
  expiry results/        nothing there sooner than that (read with
                         GetBucketLifecycleConfiguration); file store: the
                         sweeper enforces expiry
  dead-letter retention  the pipeline's dead-letter retention is counted in
                         the sum and fits inside the payloads' lifetime
  inline threshold       an inline ticket fits the transport's maximum
                         message size (256 KiB)

A warning (no expiry rule at all, no keeper) does not fail the run.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	o.in.register(c.Flags())
	return c
}

func (o *doctorOptions) run(ctx context.Context, s streams) error {
	g, r := o.g, o.r
	threshold := g.inlineThreshold
	if threshold == 0 || g.alwaysOffload {
		threshold = -1
	}
	var rep *ops.Report
	e, err := g.open(ctx, openOptions{})
	if err != nil {
		// Report what can be checked without an open store and
		// pipeline: a threshold pipeline.Open refuses shows here.
		rep = &ops.Report{Checks: []ops.Check{
			{Name: "configuration", Status: ops.StatusFail, Detail: "cannot open the store and job database: " + strings.TrimPrefix(err.Error(), "claimcheck: ")},
			ops.CheckInlineThreshold(threshold, pipeline.DefaultMaxMessageSize),
		}}
	} else {
		defer e.Close()
		// Each configured store is checked (--store NAME=URL); with
		// several, each row names its store.
		rep = &ops.Report{}
		for i, st := range e.stores {
			one, err := ops.Doctor(ctx, ops.DoctorOptions{Pipeline: e.pipe, Store: st, Retention: r, StoreURL: e.specs[i].url})
			if err != nil {
				return err
			}
			for _, c := range one.Checks {
				if len(e.stores) > 1 {
					c.Name += " [store " + e.specs[i].label() + "]"
				}
				rep.Checks = append(rep.Checks, c)
			}
			rep.Elapsed += one.Elapsed
		}
	}
	return finishChecks(s.out, g.json, "doctor", rep)
}

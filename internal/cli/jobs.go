package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

// jobsOptions are the options of jobs.
type jobsOptions struct {
	reader
	state, kind string
	paging      pagingFlags
}

// Validate checks --state, --kind, --limit and --since.
func (o *jobsOptions) Validate() error {
	if err := o.paging.validate(); err != nil {
		return err
	}
	if o.state != "" {
		if err := pipeline.ValidateState(o.state); err != nil {
			return usagef("--state: %v", err)
		}
	}
	return validateKindFlag(o.kind)
}

func newJobs(g *globals) *cobra.Command {
	o := &jobsOptions{reader: reader{g}}
	c := &cobra.Command{
		Use:   "jobs [--state S] [--kind K] [--limit N] [--since D|T]",
		Short: "List jobs",
		Long:  "List jobs, oldest first. States: available, running, retryable, scheduled, completed, cancelled, discarded, pending, or dead (cancelled and discarded).",
		Args:  exactArgs(0, "no arguments"),
		RunE:  runE(o, nil),
	}
	c.Flags().StringVar(&o.state, "state", "", "only jobs in this state")
	_ = c.RegisterFlagCompletionFunc("state", completeWords(pipeline.States()...))
	c.Flags().StringVar(&o.kind, "kind", "", "only jobs of this kind")
	o.paging.add(c, "jobs")
	c.AddCommand(newJobsRelease(g))
	return c
}

func (o *jobsOptions) runIn(ctx context.Context, s streams, e *env) error {
	return listJobs(ctx, s.out, o.g.json, e, o.paging.apply(pipeline.ListOptions{State: o.state, Kind: o.kind}, time.Now()))
}

// validateKindFlag checks an optional --kind: "" (any kind) or a valid kind.
func validateKindFlag(kind string) error {
	if kind == "" {
		return nil
	}
	if err := pipeline.ValidateKind(kind); err != nil {
		return usagef("--kind: %v", err)
	}
	return nil
}

// listJobs streams jobs as a table, or as a JSON array, one page at a time.
func listJobs(ctx context.Context, w io.Writer, asJSON bool, e *env, opts pipeline.ListOptions) error {
	if asJSON {
		sep := "[\n"
		err := e.pipe.List(ctx, opts, func(j *pipeline.JobInfo) error {
			fmt.Fprint(w, sep)
			sep = ",\n"
			return printJSONCompact(w, j)
		})
		if err != nil {
			return err
		}
		if sep == "[\n" {
			fmt.Fprint(w, sep)
		}
		fmt.Fprintln(w, "\n]")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// Dead letters show their last error too (with an --exec command's
	// stderr): whoever triages them sees why.
	dead := opts.State == pipeline.StateDead
	header := "ID\tKIND\tTENANT\tSTATE\tVIA\tPRIORITY\tATTEMPTS\tAGE\tSIZE\tPLACEMENT\tTICKET\tREASON"
	if dead {
		header += "\tERROR"
	}
	fmt.Fprintln(tw, header)
	now := time.Now()
	err := e.pipe.List(ctx, opts, func(j *pipeline.JobInfo) error {
		since := j.CreatedAt // age: since it finished or died, else since it was enqueued
		if j.FinalizedAt != nil {
			since = *j.FinalizedAt
		}
		via := "database"
		if j.Destination != "" {
			via = "broker:" + j.Destination
		}
		_, err := fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%d\t%s\t%d B\t%s", j.ID, j.Kind, j.Tenant, j.State, via, j.Priority, j.Attempts, j.MaxAttempts, age(now.Sub(since)), j.Size, placement(j.Inline), j.TicketBytes, j.Reason)
		if err == nil && dead {
			_, err = fmt.Fprintf(tw, "\t%s", strings.TrimPrefix(j.Error, j.Reason+": "))
		}
		if err == nil {
			_, err = fmt.Fprintln(tw)
		}
		return err
	})
	if err != nil {
		return err
	}
	return tw.Flush()
}

package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

func newJobs(g *globals) *cobra.Command {
	var state, kind string
	c := &cobra.Command{
		Use:   "jobs [--state S] [--kind K]",
		Short: "List jobs",
		Long:  "List jobs, oldest first. States: available, running, retryable, scheduled, completed, cancelled, discarded, pending, or dead (cancelled and discarded).",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := g.openReading(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			return listJobs(cmd, g, e, pipeline.ListOptions{State: state, Kind: kind})
		},
	}
	c.Flags().StringVar(&state, "state", "", "only jobs in this state")
	c.Flags().StringVar(&kind, "kind", "", "only jobs of this kind")
	c.AddCommand(newJobsRelease(g))
	return c
}

// listJobs streams jobs as a table, or as a JSON array, one page at a time.
func listJobs(cmd *cobra.Command, g *globals, e *env, opts pipeline.ListOptions) error {
	w := cmd.OutOrStdout()
	if g.json {
		sep := "[\n"
		err := e.pipe.List(cmd.Context(), opts, func(j *pipeline.JobInfo) error {
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
	err := e.pipe.List(cmd.Context(), opts, func(j *pipeline.JobInfo) error {
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

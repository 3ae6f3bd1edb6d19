package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

// newJobsRelease is `jobs release JOB`: return a running job whose worker
// is gone to its queue now instead of waiting for the rescuer.
func newJobsRelease(g *globals) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "release JOB",
		Short: "Return a running job whose worker is gone to its queue now",
		Long: `Return a running job to its queue now, without spending the attempt it was on,
instead of waiting for the rescuer (which takes a job once its worker has not
renewed its lease for ` + pipeline.DefaultLease.String() + `). Refused while a live worker holds the job:
its lease was renewed less than a lease ago; --force releases it anyway, for a
worker you know is gone (killed within the last lease); a worker still running
it then loses it at its next renewal.`,
		Args: exactArgs(1, "a job id"),
		RunE: g.withJob(func(cmd *cobra.Command, e *env, id int64) error {
			j, err := e.pipe.ReleaseJob(cmd.Context(), id, &pipeline.ReleaseOptions{Force: force})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), j)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %d (%s) released: %s, attempts %d/%d\n", j.ID, j.Kind, j.State, j.Attempts, j.MaxAttempts)
			return nil
		}),
	}
	c.Flags().BoolVar(&force, "force", false, "release even though its lease is fresh (its worker is known to be gone)")
	return c
}

package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

// jobsReleaseOptions are the options of jobs release.
type jobsReleaseOptions struct {
	existing
	job   jobArg
	force bool
}

// Validate checks the job id.
func (o *jobsReleaseOptions) Validate() error { return o.job.parse() }

// newJobsRelease is `jobs release JOB`: return a running job whose worker
// is gone to its queue now instead of waiting for the rescuer.
func newJobsRelease(g *globals) *cobra.Command {
	o := &jobsReleaseOptions{existing: existing{g}}
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
		RunE: runE(o, o.job.bind),
	}
	c.Flags().BoolVar(&o.force, "force", false, "release even though its lease is fresh (its worker is known to be gone)")
	c.ValidArgsFunction = completeJobIDs(g, "")
	return c
}

func (o *jobsReleaseOptions) runIn(ctx context.Context, s streams, e *env) error {
	j, err := e.pipe.ReleaseJob(ctx, o.job.id, &pipeline.ReleaseOptions{Force: o.force})
	if err != nil {
		return err
	}
	if o.g.json {
		return printJSON(s.out, j)
	}
	fmt.Fprintf(s.out, "job %d (%s) released: %s, attempts %d/%d\n", j.ID, j.Kind, j.State, j.Attempts, j.MaxAttempts)
	return nil
}

package cli

import (
	"context"
	"fmt"

	"github.com/riverqueue/river/rivertype"
	"github.com/spf13/cobra"
)

// cancelOptions are the options of cancel.
type cancelOptions struct {
	existing
	job jobArg
}

// Validate checks the job id.
func (o *cancelOptions) Validate() error { return o.job.parse() }

func newCancel(g *globals) *cobra.Command {
	o := &cancelOptions{existing: existing{g}}
	c := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a job that has not finished: it becomes a dead letter",
		Long: `Cancel a job that has not finished (the API's POST /v1/jobs/{id}/cancel). A
job waiting in its queue is cancelled at once; a running one when its handler
returns, its context cancelled meanwhile. A cancelled job is a dead letter
(reason "cancelled") that dead replay sends back. A job that completed, died
or was sent to a broker is refused (job already finished).`,
		Args: exactArgs(1, "a job id"),
		RunE: runE(o, o.job.bind),
	}
	c.ValidArgsFunction = completeJobIDs(g, "")
	return c
}

func (o *cancelOptions) runIn(ctx context.Context, s streams, e *env) error {
	j, err := e.pipe.Cancel(ctx, o.job.id)
	if err != nil {
		return err
	}
	if o.g.json {
		return printJSON(s.out, j)
	}
	if j.State == string(rivertype.JobStateRunning) {
		fmt.Fprintf(s.out, "job %d: cancel requested: its handler's context is cancelled; the job is cancelled when the handler returns\n", j.ID)
		return nil
	}
	fmt.Fprintf(s.out, "job %d cancelled: state=%s kind=%s\n", j.ID, j.State, j.Kind)
	return nil
}

package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// resultOptions are the options of result.
type resultOptions struct {
	reader
	job jobArg
	out string
}

// Validate checks the job id.
func (o *resultOptions) Validate() error { return o.job.parse() }

func newResult(g *globals) *cobra.Command {
	o := &resultOptions{reader: reader{g}}
	c := &cobra.Command{
		Use:   "result JOB [-o FILE]",
		Short: "Write a job's verified result to standard output or a file",
		Args:  exactArgs(1, "a job id"),
		RunE:  runE(o, o.job.bind),
	}
	c.Flags().StringVarP(&o.out, "output", "o", "", "write to this file instead of standard output")
	c.ValidArgsFunction = completeJobIDs(g, "")
	return c
}

func (o *resultOptions) runIn(ctx context.Context, s streams, e *env) error {
	if o.out != "" && o.out != "-" {
		// Verified as it is written, renamed over the file once verified:
		// a failure leaves nothing at it (Payload.WriteFile).
		_, err := e.pipe.WriteResult(ctx, o.job.id, o.out)
		return err
	}
	r, _, err := e.pipe.OpenResult(ctx, o.job.id)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(s.out, r)
	return err
}

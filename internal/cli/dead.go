package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

func newDead(g *globals) *cobra.Command {
	var kind string
	c := &cobra.Command{
		Use:   "dead [--kind K]",
		Short: "List dead letters with their reasons, attempts and age",
		Args:  exactArgs(0, "no arguments (did you mean: dead replay JOB?)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := g.openReading(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			return listJobs(cmd, g, e, pipeline.ListOptions{State: pipeline.StateDead, Kind: kind})
		},
	}
	c.Flags().StringVar(&kind, "kind", "", "only dead letters of this kind")
	c.AddCommand(newDeadReplay(g), newDeadPurge(g))
	return c
}

// deadIDs lists the ids of the dead letters of kind ("" for all) that died
// before cutoff (zero: any), a page at a time.
func deadIDs(cmd *cobra.Command, e *env, kind string, cutoff time.Time) ([]int64, error) {
	var ids []int64
	err := e.pipe.List(cmd.Context(), pipeline.ListOptions{State: pipeline.StateDead, Kind: kind}, func(j *pipeline.JobInfo) error {
		if cutoff.IsZero() || j.FinalizedAt != nil && j.FinalizedAt.Before(cutoff) {
			ids = append(ids, j.ID)
		}
		return nil
	})
	return ids, err
}

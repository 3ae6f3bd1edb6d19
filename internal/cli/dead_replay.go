package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

func newDeadReplay(g *globals) *cobra.Command {
	var all bool
	var kind string
	c := &cobra.Command{
		Use:   "replay JOB | replay --all [--kind K]",
		Short: "Send dead letters back to their queue, if their payloads are still readable",
		Long: `Send a dead letter (or, with --all, every dead letter, optionally of one kind)
back to its queue to be worked again. Each payload is checked first: a dead
letter whose payload expired or was deleted is refused with a message, since
working it again could only fail.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case all && len(args) > 0:
				return usagef("give a job id or --all, not both")
			case !all && len(args) != 1:
				return usagef("expected a job id, or --all")
			case !all && kind != "":
				return usagef("--kind goes with --all")
			}
			e, err := g.openExisting(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			var ids []int64
			if all {
				if ids, err = deadIDs(cmd, e, kind, time.Time{}); err != nil {
					return err
				}
			} else {
				id, err := pipeline.ParseJobID(args[0])
				if err != nil {
					return usagef("%v", err)
				}
				ids = []int64{id}
			}
			var replayed []*pipeline.JobInfo
			var refused []string
			for _, id := range ids {
				j, err := e.pipe.Replay(cmd.Context(), id)
				if err != nil {
					if !all || !errors.Is(err, pipeline.ErrPayloadGone) {
						return err
					}
					refused = append(refused, fmt.Sprintf("job %d: %s", id, claimcheck.Reason(err)))
					fmt.Fprintf(cmd.ErrOrStderr(), "job %d refused: payload expired or deleted: nothing to replay\n", id)
					continue
				}
				replayed = append(replayed, j)
				if !g.json {
					fmt.Fprintf(cmd.OutOrStdout(), "job %d replayed: state=%s kind=%s\n", j.ID, j.State, j.Kind)
				}
				if j.Destination != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "job %d goes to the outbox of destination %s again: the next relay publishes it with a message id of its own; the old copy stays in the broker's dead-letter queue\n", j.ID, j.Destination)
				}
			}
			if g.json {
				if err := printJSON(cmd.OutOrStdout(), map[string]any{"replayed": replayed, "refused": refused}); err != nil {
					return err
				}
			} else if all {
				fmt.Fprintf(cmd.OutOrStdout(), "replayed %d dead letters, refused %d\n", len(replayed), len(refused))
			}
			if len(refused) > 0 {
				return fmt.Errorf("%d dead letters not replayed: their payloads expired or were deleted", len(refused))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&all, "all", false, "replay every dead letter (of --kind, if given)")
	c.Flags().StringVar(&kind, "kind", "", "with --all: only dead letters of this kind")
	return c
}

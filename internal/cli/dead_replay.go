package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// deadReplayOptions are the options of dead replay.
type deadReplayOptions struct {
	existing
	all  bool
	kind string
	args []string
	job  jobArg // the job id argument, set by Validate
}

// Validate checks that a job id or --all is given, not both, and --kind
// only with --all.
func (o *deadReplayOptions) Validate() error {
	switch {
	case o.all && len(o.args) > 0:
		return usagef("give a job id or --all, not both")
	case !o.all && len(o.args) != 1:
		return usagef("expected a job id, or --all")
	case !o.all && o.kind != "":
		return usagef("--kind goes with --all")
	}
	if !o.all {
		o.job.arg = o.args[0]
		if err := o.job.parse(); err != nil {
			return err
		}
	}
	return validateKindFlag(o.kind)
}

func newDeadReplay(g *globals) *cobra.Command {
	o := &deadReplayOptions{existing: existing{g}}
	c := &cobra.Command{
		Use:   "replay JOB | replay --all [--kind K]",
		Short: "Send dead letters back to their queue, if their payloads are still readable",
		Long: `Send a dead letter (or, with --all, every dead letter, optionally of one kind)
back to its queue to be worked again. Each payload is checked first: a dead
letter whose payload expired or was deleted is refused with a message, since
working it again could only fail.`,
		RunE: runE(o, func(_ *cobra.Command, args []string) { o.args = args }),
	}
	c.Flags().BoolVar(&o.all, "all", false, "replay every dead letter (of --kind, if given)")
	c.Flags().StringVar(&o.kind, "kind", "", "with --all: only dead letters of this kind")
	c.ValidArgsFunction = completeJobIDs(g, pipeline.StateDead)
	return c
}

func (o *deadReplayOptions) runIn(ctx context.Context, s streams, e *env) error {
	ids := []int64{o.job.id}
	if o.all {
		var err error
		if ids, err = e.pipe.DeadIDs(ctx, o.kind, time.Time{}); err != nil {
			return err
		}
	}
	var replayed []*pipeline.JobInfo
	var refused []string
	for _, id := range ids {
		j, err := e.pipe.Replay(ctx, id)
		if err != nil {
			if !o.all || !errors.Is(err, pipeline.ErrPayloadGone) {
				return err
			}
			refused = append(refused, fmt.Sprintf("job %d: %s", id, claimcheck.Reason(err)))
			note := ""
			var gone *pipeline.AttachmentGoneError
			if errors.As(err, &gone) && gone.Name != "" {
				note = fmt.Sprintf(" (its attachment %q is gone)", gone.Name)
			}
			fmt.Fprintf(s.err, "job %d refused: payload expired or deleted: nothing to replay%s\n", id, note)
			continue
		}
		replayed = append(replayed, j)
		if !o.g.json {
			fmt.Fprintf(s.out, "job %d replayed: state=%s kind=%s\n", j.ID, j.State, j.Kind)
		}
		if j.Destination != "" {
			fmt.Fprintf(s.err, "job %d goes to the outbox of destination %s again: the next relay publishes it with a message id of its own; the old copy stays in the broker's dead-letter queue\n", j.ID, j.Destination)
		}
	}
	if o.g.json {
		if err := printJSON(s.out, map[string]any{"replayed": replayed, "refused": refused}); err != nil {
			return err
		}
	} else if o.all {
		fmt.Fprintf(s.out, "replayed %d dead letters, refused %d\n", len(replayed), len(refused))
	}
	if len(refused) > 0 {
		return fmt.Errorf("%d dead letters not replayed: their payloads expired or were deleted", len(refused))
	}
	return nil
}

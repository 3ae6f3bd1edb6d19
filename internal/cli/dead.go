package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

// deadOptions are the options of dead.
type deadOptions struct {
	reader
	kind   string
	paging pagingFlags
}

// Validate checks --kind, --limit and --since.
func (o *deadOptions) Validate() error {
	if err := o.paging.validate(); err != nil {
		return err
	}
	return validateKindFlag(o.kind)
}

func newDead(g *globals) *cobra.Command {
	o := &deadOptions{reader: reader{g}}
	c := &cobra.Command{
		Use:   "dead [--kind K] [--limit N] [--since D|T]",
		Short: "List dead letters with their reasons, attempts and age",
		Args:  exactArgs(0, "no arguments (did you mean: dead replay JOB?)"),
		RunE:  runE(o, nil),
	}
	c.Flags().StringVar(&o.kind, "kind", "", "only dead letters of this kind")
	o.paging.add(c, "dead letters")
	c.AddCommand(newDeadReplay(g), newDeadPurge(g))
	return c
}

func (o *deadOptions) runIn(ctx context.Context, s streams, e *env) error {
	return listJobs(ctx, s.out, o.g.json, e, o.paging.apply(pipeline.ListOptions{State: pipeline.StateDead, Kind: o.kind}, time.Now()))
}

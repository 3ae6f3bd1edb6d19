package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

// deadOptions are the options of dead.
type deadOptions struct {
	reader
	kind string
}

// Validate checks --kind.
func (o *deadOptions) Validate() error { return validateKindFlag(o.kind) }

func newDead(g *globals) *cobra.Command {
	o := &deadOptions{reader: reader{g}}
	c := &cobra.Command{
		Use:   "dead [--kind K]",
		Short: "List dead letters with their reasons, attempts and age",
		Args:  exactArgs(0, "no arguments (did you mean: dead replay JOB?)"),
		RunE:  runE(o, nil),
	}
	c.Flags().StringVar(&o.kind, "kind", "", "only dead letters of this kind")
	c.AddCommand(newDeadReplay(g), newDeadPurge(g))
	return c
}

func (o *deadOptions) runIn(ctx context.Context, s streams, e *env) error {
	return listJobs(ctx, s.out, o.g.json, e, pipeline.ListOptions{State: pipeline.StateDead, Kind: o.kind})
}

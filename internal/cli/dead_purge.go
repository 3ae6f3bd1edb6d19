package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
)

// deadPurgeOptions are the options of dead purge.
type deadPurgeOptions struct {
	existing
	kind, olderThan string
	dryRun          bool
	older           time.Duration // --older-than parsed by Validate; 0: any age
}

// Validate checks --kind and parses --older-than.
func (o *deadPurgeOptions) Validate() error {
	if o.olderThan != "" {
		d, err := claimcheck.ParseDuration(o.olderThan)
		if err != nil || d <= 0 {
			return usagef("--older-than %q: give a positive duration such as 14d or 36h", o.olderThan)
		}
		o.older = d
	}
	return validateKindFlag(o.kind)
}

func newDeadPurge(g *globals) *cobra.Command {
	o := &deadPurgeOptions{existing: existing{g}}
	c := &cobra.Command{
		Use:   "purge [--kind K] [--older-than D] [--dry-run]",
		Short: "Delete dead letters and their claims-registry rows",
		Long: `Delete dead letters (optionally of one kind, or dead for longer than D, e.g.
14d) with their claims-registry rows. Their payloads are not deleted here:
once no job refers to them they are orphans, which "claimcheck sweep" removes
after its grace period, or the bucket's lifecycle expires.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	c.Flags().StringVar(&o.kind, "kind", "", "only dead letters of this kind")
	c.Flags().StringVar(&o.olderThan, "older-than", "", "only dead letters dead for longer than this (e.g. 14d)")
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "list what would be purged, delete nothing")
	return c
}

func (o *deadPurgeOptions) runIn(ctx context.Context, s streams, e *env) error {
	var cutoff time.Time
	if o.older > 0 {
		cutoff = time.Now().Add(-o.older)
	}
	ids, err := e.pipe.DeadIDs(ctx, o.kind, cutoff)
	if err != nil {
		return err
	}
	n := len(ids)
	if !o.dryRun {
		if n, err = e.pipe.Delete(ctx, ids...); err != nil {
			return err
		}
	}
	if o.g.json {
		return printJSON(s.out, map[string]any{"ids": ids, "purged": n, "dry_run": o.dryRun})
	}
	verb := "purged"
	if o.dryRun {
		verb = "would purge"
	}
	fmt.Fprintf(s.out, "%s %d dead letters %v\n", verb, n, ids)
	return nil
}

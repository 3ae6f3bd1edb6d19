package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
)

func newDeadPurge(g *globals) *cobra.Command {
	var kind, olderThan string
	var dryRun bool
	c := &cobra.Command{
		Use:   "purge [--kind K] [--older-than D] [--dry-run]",
		Short: "Delete dead letters and their claims-registry rows",
		Long: `Delete dead letters (optionally of one kind, or dead for longer than D, e.g.
14d) with their claims-registry rows. Their payloads are not deleted here:
once no job refers to them they are orphans, which "claimcheck sweep" removes
after its grace period, or the bucket's lifecycle expires.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cutoff time.Time
			if olderThan != "" {
				d, err := claimcheck.ParseDuration(olderThan)
				if err != nil || d <= 0 {
					return usagef("--older-than %q: give a positive duration such as 14d or 36h", olderThan)
				}
				cutoff = time.Now().Add(-d)
			}
			e, err := g.openExisting(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			ids, err := deadIDs(cmd, e, kind, cutoff)
			if err != nil {
				return err
			}
			n := len(ids)
			if !dryRun {
				if n, err = e.pipe.Delete(cmd.Context(), ids...); err != nil {
					return err
				}
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"ids": ids, "purged": n, "dry_run": dryRun})
			}
			verb := "purged"
			if dryRun {
				verb = "would purge"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d dead letters %v\n", verb, n, ids)
			return nil
		},
	}
	c.Flags().StringVar(&kind, "kind", "", "only dead letters of this kind")
	c.Flags().StringVar(&olderThan, "older-than", "", "only dead letters dead for longer than this (e.g. 14d)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be purged, delete nothing")
	return c
}

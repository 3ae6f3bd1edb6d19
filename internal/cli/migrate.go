package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

// migrateOptions are the options of migrate: it has no flags of its own.
type migrateOptions struct{ g *globals }

// Validate has nothing to check: migrate has no flags of its own.
func (o *migrateOptions) Validate() error { return nil }

func newMigrate(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the job database's migrations (River's and the claims registry's) and print them",
		Long: `Bring the job database's schema up to date: River's migrations, then the claims
registry's, and print each one applied (nothing when it is already current).
On PostgreSQL 14 and later it also sets the TOAST compression of River's
river_job.args to lz4 (component storage): inline payloads, sealed by
default, cost the server's default compressor (pglz) CPU on every insert for
nothing; when the server or the role does not allow it, a note says so and
the column is left as it was. It opens the database only (--database, or
the embedded SQLite file in the data directory), never the store or keys.

Every other command migrates on start-up by itself; run this one to migrate
ahead of a deploy, when workers are configured not to (pipeline.Config
SkipMigrations), or with a role allowed to change the schema. Several
processes may migrate at once: on PostgreSQL they take turns under an
advisory lock.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(&migrateOptions{g: g}, nil),
	}
}

func (o *migrateOptions) run(ctx context.Context, s streams) error {
	g := o.g
	database := g.database
	if database == "" {
		data, err := filepath.Abs(g.data)
		if err != nil {
			return fmt.Errorf("data directory %q: %w", g.data, err)
		}
		database = "sqlite://" + filepath.ToSlash(filepath.Join(data, "claimcheck.db"))
	}
	res, err := pipeline.Migrate(ctx, database)
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(s.out, res)
	}
	out := s.out
	if len(res.Applied) == 0 {
		fmt.Fprintf(out, "%s database %s is up to date: no migration to apply\n", res.Dialect, res.Database)
	} else {
		fmt.Fprintf(out, "migrated %s database %s:\n", res.Dialect, res.Database)
		for _, a := range res.Applied {
			fmt.Fprintf(out, "  %-15s %03d  %s (%s)\n", a.Component, a.Version, a.Name, a.Duration.Round(100*time.Microsecond))
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	return nil
}

package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/apiauth"
)

// tokensListOptions are the options of tokens list.
type tokensListOptions struct{ existing }

// Validate has nothing to check.
func (o *tokensListOptions) Validate() error { return nil }

func newTokensList(g *globals) *cobra.Command {
	o := &tokensListOptions{existing{g}}
	return &cobra.Command{
		Use:   "list",
		Short: "List API tokens (never the tokens themselves)",
		Args:  exactArgs(0, "no arguments"),
		RunE:  runE(o, nil),
	}
}

func (o *tokensListOptions) runIn(ctx context.Context, s streams, e *env) error {
	ts, err := apiauth.New(e.pipe.DB()).List(ctx)
	if err != nil {
		return err
	}
	if o.g.json {
		return printJSON(s.out, ts)
	}
	w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tTENANTS\tCREATED\tSTATE")
	for _, t := range ts {
		state := "live"
		if t.Revoked != nil {
			state = "revoked " + t.Revoked.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, tenantsLabel(t.Tenants), t.Created.Format(time.RFC3339), state)
	}
	return w.Flush()
}

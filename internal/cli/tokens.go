package cli

import (
	"github.com/spf13/cobra"
)

// newTokens is `tokens`: the API tokens of serve (internal/apiauth), with
// create, list and revoke below it.
func newTokens(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "tokens",
		Short: "Manage serve's API tokens (create, list, revoke)",
		Long: `Manage the API tokens serve accepts on /v1 (and, for an all-tenants token, on
the web console) from hosts other than this one. Each token may act only on the
tenants it was created for; the job database keeps its SHA-256, never the token,
which create prints once. Without any live token, serve's API answers requests
from this host only.`,
		Args: exactArgs(0, "a subcommand: create, list or revoke"),
	}
	c.AddCommand(newTokensCreate(g), newTokensList(g), newTokensRevoke(g))
	return c
}

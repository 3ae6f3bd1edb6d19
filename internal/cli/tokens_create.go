package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/apiauth"
)

// tokensCreateOptions are the options of tokens create.
type tokensCreateOptions struct {
	g       *globals
	tenants []string
	all     bool
	name    string
}

// opening sets a deployment up if need be: a token may be made before
// anything was submitted.
func (o *tokensCreateOptions) opening() (*globals, openOptions) { return o.g, openOptions{} }

// Validate checks --tenant (or --all-tenants) and --name.
func (o *tokensCreateOptions) Validate() error {
	tenants := o.tenants
	if o.all {
		if len(tenants) > 0 {
			return usagef("--all-tenants and --tenant: give one or the other")
		}
		tenants = []string{apiauth.AllTenants}
	}
	if len(tenants) == 0 {
		return usagef("give --tenant T (repeatable) or --all-tenants")
	}
	if err := apiauth.ValidateTenants(tenants); err != nil {
		return usagef("--tenant: %v", err)
	}
	if err := apiauth.ValidateName(o.name); err != nil {
		return usagef("--name: %v", err)
	}
	o.tenants = tenants
	return nil
}

func newTokensCreate(g *globals) *cobra.Command {
	o := &tokensCreateOptions{g: g}
	c := &cobra.Command{
		Use:   "create --tenant T [--tenant U]... [--name N] | --all-tenants",
		Short: "Make an API token for some tenants and print it (once)",
		Long: `Make an API token allowed to submit, read and claim the jobs of the given
tenants, and print it on standard output. It is printed only now: the job
database keeps its SHA-256. An --all-tenants token may act on every tenant and
also opens the web console from other hosts.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	c.Flags().StringArrayVar(&o.tenants, "tenant", nil, "tenant the token may act on (repeatable)")
	c.Flags().BoolVar(&o.all, "all-tenants", false, "the token may act on every tenant (and open the web console)")
	c.Flags().StringVar(&o.name, "name", "", "a label for list (at most 64 printable ASCII bytes)")
	return c
}

func (o *tokensCreateOptions) runIn(ctx context.Context, s streams, e *env) error {
	token, t, err := apiauth.New(e.pipe.DB()).Create(ctx, o.name, o.tenants)
	if err != nil {
		return err
	}
	if o.g.json {
		return printJSON(s.out, struct {
			Secret string `json:"token"`
			apiauth.Token
		}{token, *t})
	}
	fmt.Fprintln(s.out, token)
	fmt.Fprintf(s.err, "token %s for %s created; it is shown only now: keep it in your secret store\n", t.ID, tenantsLabel(t.Tenants))
	return nil
}

// tenantsLabel describes a token's tenants for people.
func tenantsLabel(tenants []string) string {
	if len(tenants) == 1 && tenants[0] == apiauth.AllTenants {
		return "all tenants"
	}
	return "tenants " + strings.Join(tenants, ", ")
}

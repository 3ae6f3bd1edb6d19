package cli

import (
	"context"
	"fmt"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/apiauth"
)

// tokensRevokeOptions are the options of tokens revoke.
type tokensRevokeOptions struct {
	existing
	id string
}

var tokenIDRegexp = regexp.MustCompile(`^[0-9a-f]{12}$`)

// Validate checks the id has a token id's shape (12 hex digits, as list
// prints).
func (o *tokensRevokeOptions) Validate() error {
	if !tokenIDRegexp.MatchString(o.id) {
		return usagef("token id %q: give the 12 hex digits tokens list prints (not the token itself)", o.id)
	}
	return nil
}

func newTokensRevoke(g *globals) *cobra.Command {
	o := &tokensRevokeOptions{existing: existing{g}}
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API token: serve refuses it from then on",
		Args:  exactArgs(1, "a token id (tokens list)"),
		RunE:  runE(o, func(_ *cobra.Command, args []string) { o.id = args[0] }),
	}
}

func (o *tokensRevokeOptions) runIn(ctx context.Context, s streams, e *env) error {
	if err := apiauth.New(e.pipe.DB()).Revoke(ctx, o.id); err != nil {
		return err
	}
	fmt.Fprintf(s.out, "token %s revoked\n", o.id)
	return nil
}

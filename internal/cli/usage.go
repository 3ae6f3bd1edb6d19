package cli

// Usage errors (exit status 2) and argument checks shared by the subcommands.

import (
	"fmt"

	"github.com/spf13/cobra"
)

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %s, got %d arguments", what, len(args))
		}
		return nil
	}
}

type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

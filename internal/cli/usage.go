package cli

// Usage errors (exit status 2) and argument checks shared by the subcommands.

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
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

// jobArg is the one argument of a command taking a job id.
type jobArg struct {
	arg string
	id  int64 // set by parse
}

// parse checks the argument is a job id (a usage error if not).
func (j *jobArg) parse() error {
	id, err := pipeline.ParseJobID(j.arg)
	if err != nil {
		return usagef("%v", err)
	}
	j.id = id
	return nil
}

// bindJob is the bind of runE for a command taking a job id.
func (j *jobArg) bind(_ *cobra.Command, args []string) { j.arg = args[0] }

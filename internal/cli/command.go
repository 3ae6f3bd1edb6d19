package cli

// The shape every subcommand has, as in River's own cmd/river: an options
// struct holding its flags (bound in its cobra constructor), a Validate
// that checks them, and a run that does the command.

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// options is one subcommand's options. Validate checks the subcommand's own
// flags and arguments and returns a usage error (exit status 2) for a bad
// one, before anything is opened. A subcommand reads the global flags
// (globals) and its own options only, and writes neither: what it asks of
// the data directory it opens goes in an openOptions.
//
// The options also have the command's run: run(ctx, streams) (a runner),
// or, for a command that works on an opened data directory and asks no
// more of it than openOptions, runIn(ctx, streams, env) with opening (an
// envRunner): runE opens it and closes it.
type options interface {
	Validate() error
}

// runner is the run of a subcommand that opens what it needs itself.
type runner interface {
	run(ctx context.Context, s streams) error
}

// envRunner is the run of a subcommand on an opened data directory: runE
// opens it with the globals and openOptions opening returns.
type envRunner interface {
	opening() (*globals, openOptions)
	runIn(ctx context.Context, s streams, e *env) error
}

// existing is embedded in the options of a subcommand that works on an
// existing deployment without setting one up (openOptions.readOnly); it
// holds the globals.
type existing struct{ g *globals }

func (x existing) opening() (*globals, openOptions) { return x.g, openOptions{readOnly: true} }

// reader is embedded in the options of a subcommand that only reads and
// writes nothing at all (openOptions.readOnly and noWrites); it holds the
// globals.
type reader struct{ g *globals }

func (r reader) opening() (*globals, openOptions) {
	return r.g, openOptions{readOnly: true, noWrites: true}
}

// streams are a command's standard input, output and error.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// runE is the RunE of a subcommand with options o, a runner or an
// envRunner: bind (when set) first records in o what only cobra knows (the
// positional arguments, whether a flag was given), then o is validated and
// run.
func runE(o options, bind func(cmd *cobra.Command, args []string)) func(*cobra.Command, []string) error {
	r, isRunner := o.(runner)
	er, isEnvRunner := o.(envRunner)
	if !isRunner && !isEnvRunner {
		panic(fmt.Sprintf("cli: %T has neither run nor runIn", o))
	}
	return func(cmd *cobra.Command, args []string) error {
		if bind != nil {
			bind(cmd, args)
		}
		if err := o.Validate(); err != nil {
			return err
		}
		ctx, s := cmd.Context(), streams{in: cmd.InOrStdin(), out: cmd.OutOrStdout(), err: cmd.ErrOrStderr()}
		if isRunner {
			return r.run(ctx, s)
		}
		g, oo := er.opening()
		e, err := g.open(ctx, oo)
		if err != nil {
			return err
		}
		defer e.Close()
		return er.runIn(ctx, s, e)
	}
}

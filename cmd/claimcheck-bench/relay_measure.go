package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/internal/cli"
)

// benchRelayMeasureOptions are the options of bench relay measure, bench
// relay's launcher: it runs a program with this process's standard
// streams and writes its elapsed time and peak RSS (bench.ChildUsage) as
// JSON to --usage. Hidden: bench relay runs it.
type benchRelayMeasureOptions struct {
	usageFile string
	stopAfter time.Duration
	argv      []string // the program and its arguments
}

// Validate checks that --usage is given.
func (o *benchRelayMeasureOptions) Validate() error {
	if o.usageFile == "" {
		return cli.UsageErrorf("measure needs --usage FILE")
	}
	return nil
}

func newBenchRelayMeasure(l *cli.Lab) *cobra.Command {
	o := &benchRelayMeasureOptions{}
	c := &cobra.Command{
		Use:    "measure --usage FILE [--stop-after D] -- PROGRAM [ARGS...]",
		Short:  "Run a program and record its elapsed time and peak RSS (bench relay's launcher)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE:   l.RunE(o, func(_ *cobra.Command, args []string) { o.argv = args }),
	}
	c.Flags().StringVar(&o.usageFile, "usage", "", "write the measurement here, as JSON")
	c.Flags().DurationVar(&o.stopAfter, "stop-after", 0, "interrupt the program after this long (0: let it exit)")
	return c
}

// Run runs the program and writes its usage to --usage.
func (o *benchRelayMeasureOptions) Run(ctx context.Context, s cli.Streams) error {
	args := o.argv
	child := exec.CommandContext(ctx, args[0], args[1:]...)
	child.Stdin, child.Stdout, child.Stderr = s.In, s.Out, s.Err
	cli.DieWithParent(child)
	if o.stopAfter > 0 {
		// A service's run: interrupt it (SIGINT, as Ctrl-C does)
		// after the window, whatever its backlog.
		t := time.AfterFunc(o.stopAfter, func() {
			if child.Process != nil {
				_ = child.Process.Signal(os.Interrupt)
			}
		})
		defer t.Stop()
	}
	u, err := bench.MeasureChild(child, 10*time.Millisecond)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(args[0]), err)
	}
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return os.WriteFile(o.usageFile, b, 0o600)
}

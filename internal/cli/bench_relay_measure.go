package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/bench"
)

// newBenchRelayMeasure is bench relay's launcher: it runs a program with
// this process's standard streams and writes its elapsed time and peak RSS
// (bench.ChildUsage) as JSON to --usage. Hidden: bench relay runs it.
func newBenchRelayMeasure() *cobra.Command {
	var usageFile string
	var stopAfter time.Duration
	c := &cobra.Command{
		Use:    "measure --usage FILE [--stop-after D] -- PROGRAM [ARGS...]",
		Short:  "Run a program and record its elapsed time and peak RSS (bench relay's launcher)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if usageFile == "" {
				return usagef("measure needs --usage FILE")
			}
			child := exec.CommandContext(cmd.Context(), args[0], args[1:]...)
			child.Stdin, child.Stdout, child.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			dieWithParent(child)
			if stopAfter > 0 {
				// A service's run: interrupt it (SIGINT, as Ctrl-C does)
				// after the window, whatever its backlog.
				t := time.AfterFunc(stopAfter, func() {
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
			return os.WriteFile(usageFile, b, 0o600)
		},
	}
	c.Flags().StringVar(&usageFile, "usage", "", "write the measurement here, as JSON")
	c.Flags().DurationVar(&stopAfter, "stop-after", 0, "interrupt the program after this long (0: let it exit)")
	return c
}

package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

func newResult(g *globals) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "result JOB [-o FILE]",
		Short: "Write a job's verified result to standard output or a file",
		Args:  exactArgs(1, "a job id"),
		RunE: g.withJobReading(func(cmd *cobra.Command, e *env, id int64) error {
			r, _, err := e.pipe.OpenResult(cmd.Context(), id)
			if err != nil {
				return err
			}
			defer r.Close()
			if out == "" || out == "-" {
				_, err = io.Copy(cmd.OutOrStdout(), r)
				return err
			}
			return writeFileAtomic(out, r)
		}),
	}
	c.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	return c
}

// writeFileAtomic writes r to path through a temporary file in the same
// directory, so a failure leaves any existing file untouched.
func writeFileAtomic(path string, r io.Reader) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("cannot write %s: it is a directory; give a file name", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".claimcheck-result-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", path, unwrapPath(err))
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}

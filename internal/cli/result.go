package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// resultOptions are the options of result.
type resultOptions struct {
	reader
	job jobArg
	out string
}

// Validate checks the job id.
func (o *resultOptions) Validate() error { return o.job.parse() }

func newResult(g *globals) *cobra.Command {
	o := &resultOptions{reader: reader{g}}
	c := &cobra.Command{
		Use:   "result JOB [-o FILE]",
		Short: "Write a job's verified result to standard output or a file",
		Args:  exactArgs(1, "a job id"),
		RunE:  runE(o, o.job.bind),
	}
	c.Flags().StringVarP(&o.out, "output", "o", "", "write to this file instead of standard output")
	c.ValidArgsFunction = completeJobIDs(g, "")
	return c
}

func (o *resultOptions) runIn(ctx context.Context, s streams, e *env) error {
	r, _, err := e.pipe.OpenResult(ctx, o.job.id)
	if err != nil {
		return err
	}
	defer r.Close()
	if o.out == "" || o.out == "-" {
		_, err = io.Copy(s.out, r)
		return err
	}
	return writeFileAtomic(o.out, r)
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

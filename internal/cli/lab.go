package cli

// The seam between this command tree and the team's lab command
// (cmd/claimcheck-bench): the lab runs this same tree with its comparisons
// added (an Extension), so that it shares the global flags, the exit codes
// and the deployments they open, while the shipped claimcheck command
// carries none of the comparison code (internal/benchlab).

import (
	"context"
	"io"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Extension adds commands or flags to the command tree root before it
// runs; l gives them the global flags and the deployments they open.
type Extension func(root *cobra.Command, l *Lab)

// Lab is what an Extension's commands borrow from the command tree: its
// global flags (as given, after validation) and its conventions.
type Lab struct{ g *globals }

// LabOptions are a lab command's options, as this tree's own commands
// have (see options): Validate checks the flags and returns a usage error
// (UsageErrorf) for a bad one; Run does the command.
type LabOptions interface {
	Validate() error
	Run(ctx context.Context, s Streams) error
}

// Streams are a command's standard input, output and error.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// ExecuteWith is Execute with ext applied to the command tree.
func ExecuteWith(ext Extension) int { return execute(ext) }

// RunWith is Run with ext applied to the command tree; tests of an
// Extension call it in-process.
func RunWith(ctx context.Context, ext Extension, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, ext, args, stdin, stdout, stderr)
}

// UsageErrorf is a usage error (exit status 2): bad input refused before
// anything ran.
func UsageErrorf(format string, args ...any) error { return usagef(format, args...) }

// RunE is the RunE of a lab command with options o: bind (when set)
// records in o what only cobra knows, then o is validated and run.
func (l *Lab) RunE(o LabOptions, bind func(cmd *cobra.Command, args []string)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if bind != nil {
			bind(cmd, args)
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context(), Streams{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()})
	}
}

// The global flags, as given: --data, the default --store URL ("" for the
// file store in the data directory), --database, --json, --broker (and
// redacted for printing), --destination, --secret (hex), --keeper and
// --log-level.
func (l *Lab) Data() string           { return l.g.data }
func (l *Lab) Store() string          { return l.g.store }
func (l *Lab) Database() string       { return l.g.database }
func (l *Lab) JSON() bool             { return l.g.json }
func (l *Lab) Broker() string         { return l.g.brokerURL }
func (l *Lab) RedactedBroker() string { return l.g.redactedBroker() }
func (l *Lab) Destination() string    { return l.g.destination }
func (l *Lab) Secret() string         { return l.g.secretHex }
func (l *Lab) Keeper() string         { return l.g.keeper }
func (l *Lab) LogLevel() string       { return l.g.logLevel }

// BenchData is bench's data directory: --data made absolute, created and
// checked writable, and, when need > 0, with need bytes free (a usage
// error naming flag otherwise).
func (l *Lab) BenchData(need uint64, flag string) (string, error) { return benchData(l.g, need, flag) }

// PrintReport prints a bench report as a table, or as JSON with --json.
func (l *Lab) PrintReport(w io.Writer, rep interface {
	JSON() ([]byte, error)
	Write(io.Writer) error
}) error {
	return printReport(w, l.g.json, rep)
}

// SetBenchBaseline makes bench measure f's reference beside claimcheck on
// an s3:// store (bench.Config.Baseline).
func (l *Lab) SetBenchBaseline(f bench.BaselineFunc) { l.g.benchBaseline = f }

// DieWithParent asks the OS, where it can (Linux), to kill cmd when this
// process dies, even by SIGKILL.
func DieWithParent(cmd *exec.Cmd) { dieWithParent(cmd) }

// Outbox is a deployment opened for enqueueing to the outbox of
// --destination, every payload stored as an object however small.
type Outbox struct {
	e    *env
	dest string
}

// OpenOutbox opens the deployment in the data directory dir with the job
// database database ("": SQLite in dir) and the other global flags, and
// checks that --broker is up and can carry tickets of kind (so that a
// relay over it does not fail later). Close it.
func (l *Lab) OpenOutbox(ctx context.Context, dir, database, kind string) (*Outbox, error) {
	gg := l.g.inDataDir(dir, database)
	e, err := gg.open(ctx, openOptions{alwaysOffload: true})
	if err != nil {
		return nil, err
	}
	tr, err := gg.openBroker(ctx, e, kind)
	if err != nil {
		e.Close()
		return nil, err
	}
	tr.Close()
	return &Outbox{e: e, dest: l.g.destination}, nil
}

// Enqueue checks r in for tenant and enqueues a job of kind to the
// outbox of --destination.
func (o *Outbox) Enqueue(ctx context.Context, kind, tenant string, r io.Reader) error {
	_, err := o.e.pipe.Enqueue(ctx, kind, tenant, r, &pipeline.EnqueueOptions{Destinations: []string{o.dest}})
	return err
}

// Close closes the deployment.
func (o *Outbox) Close() { o.e.Close() }

// ExactArgs accepts exactly n positional arguments (what names them in
// the usage error).
func ExactArgs(n int, what string) cobra.PositionalArgs { return exactArgs(n, what) }

// RootWith is Root with ext applied: the lab command's tree, for checking
// the commands its documents show.
func RootWith(ext Extension) *cobra.Command {
	root, g := newRootGlobals(io.Discard)
	ext(root, &Lab{g: g})
	return root
}

// BenchDeployment is the deployment bench jobs and bench workload
// measure (openBenchEnv), for a lab command measuring it beside a
// reference.
type BenchDeployment struct {
	b *benchEnv
	// Pipeline is its job pipeline; Store and Database the URLs of its
	// store (with the bench's namespace) and job database.
	Pipeline        *pipeline.Pipeline
	Store, Database string
}

// OpenBench opens the deployment of the global flags as bench workload
// does, under the data directory data (BenchData): a scratch SQLite file
// and file store there unless --database and --store name others, the
// store under a namespace of the bench's own. Close it.
func (l *Lab) OpenBench(ctx context.Context, data string) (*BenchDeployment, error) {
	b, err := openBenchEnv(ctx, l.g, data)
	if err != nil {
		return nil, err
	}
	return &BenchDeployment{b: b, Pipeline: b.pipe, Store: b.store, Database: b.database}, nil
}

// Close deletes the bench's objects, closes the deployment and removes
// its scratch directory.
func (d *BenchDeployment) Close(ctx context.Context) error { return d.b.close(ctx) }

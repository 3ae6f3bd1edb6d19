// Package cli is the claimcheck command: cobra commands over the root
// package and the job pipeline. cmd/claimcheck calls Execute.
package cli

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"gocloud.dev/secrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// globals are the flags every subcommand shares; each has an environment
// variable that sets its default.
type globals struct {
	data            string
	store           string
	database        string
	secretHex       string
	keeper          string
	tenants         []string // set by work: the only tenants claimed
	inlineThreshold int64
	alwaysOffload   bool
	maxPayloadSize  int64
	maxAttempts     int
	json            bool
	logLevel        string
	stderr          io.Writer
	envErrs         []error
	sqliteCacheKiB  int // set by relay: a small page cache
	brokerURL       string
	destination     string
	memOK           bool // the command runs submit and work in one process
	readOnly        bool // the command only reads: it must not create a database
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// envInt is the integer in environment variable name, or def; a value that
// does not parse is recorded in errs and reported before any command runs.
func envInt(name string, def int64, errs *[]error) int64 {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s=%q is not an integer", name, v))
		return def
	}
	return n
}

// envBool is true for 1/true/yes, false for 0/false/no or unset; anything
// else is recorded in errs.
func envBool(name string, errs *[]error) bool {
	switch v := strings.ToLower(os.Getenv(name)); v {
	case "", "0", "false", "no":
		return false
	case "1", "true", "yes":
		return true
	default:
		*errs = append(*errs, fmt.Errorf("%s=%q: use 1 or 0", name, v))
		return false
	}
}

// validate checks the global settings before a command runs.
func (g *globals) validate() error {
	if len(g.envErrs) > 0 {
		return usageError{errors.Join(g.envErrs...)}
	}
	switch {
	case g.inlineThreshold < 0 || g.inlineThreshold > claimcheck.MaxInlineThreshold:
		return usagef("--inline-threshold %d: use 0 (nothing inline) to %d bytes", g.inlineThreshold, claimcheck.MaxInlineThreshold)
	case g.maxPayloadSize < 0:
		return usagef("--max-payload-size %d: use 0 (no limit) or a positive number of bytes", g.maxPayloadSize)
	case g.maxAttempts < 1 || g.maxAttempts > 1000:
		return usagef("--max-attempts %d: use 1 to 1000", g.maxAttempts)
	}
	if err := pipeline.ValidateDestination(g.destination); err != nil {
		return usagef("--destination: %v", err)
	}
	return nil
}

// Execute runs the claimcheck command with os.Args and returns the process
// exit code.
func Execute() int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx, ab := withAbort(ctx)
	go func() {
		// The first SIGTERM or interrupt cancels ctx: a worker drains.
		<-sigs
		cancel()
		// The second stops at once: a worker that took the abort channel
		// ends its handlers' process groups and returns their jobs to the
		// queue; any other command ends here.
		<-sigs
		signal.Reset(os.Interrupt, syscall.SIGTERM) // a third: the default
		if !ab.taken.Load() {
			os.Exit(130)
		}
		close(ab.ch)
		time.Sleep(abortGrace)
		os.Exit(130)
	}()
	return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// abortGrace bounds how long a worker may take, after the second signal,
// to return its jobs to the queue before the process exits anyway.
const abortGrace = 10 * time.Second

// abort is the second signal, for the command that stops at once on it.
type abort struct {
	ch    chan struct{}
	taken atomic.Bool
}

type abortKey struct{}

// withAbort returns ctx carrying a new abort channel.
func withAbort(ctx context.Context) (context.Context, *abort) {
	ab := &abort{ch: make(chan struct{})}
	return context.WithValue(ctx, abortKey{}, ab), ab
}

// takeAbort returns the channel the second signal closes, or nil when ctx
// has none (a test calling Run); the command taking it promises to stop at
// once when it closes.
func takeAbort(ctx context.Context) <-chan struct{} {
	ab, _ := ctx.Value(abortKey{}).(*abort)
	if ab == nil {
		return nil
	}
	ab.taken.Store(true)
	return ab.ch
}

// Run runs the command with args and the given standard streams; tests call
// it in-process. It returns the exit code: 0 on success, 1 on failure, 2 on
// a usage error.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Workers, their --exec commands and the logger write concurrently.
	stdout, stderr = &syncWriter{w: stdout}, &syncWriter{w: stderr}
	root := newRoot(stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "claimcheck:", strings.TrimPrefix(err.Error(), "claimcheck: "))
		var ue usageError
		// Bad input refused before anything ran is a usage error: a flag, or
		// an invalid tenant, name or configuration.
		if errors.As(err, &ue) || errors.Is(err, claimcheck.ErrConfig) || errors.Is(err, claimcheck.ErrTicketInvalid) ||
			strings.HasPrefix(err.Error(), "unknown command") {
			return 2
		}
		return 1
	}
	return 0
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func newRoot(stderr io.Writer) *cobra.Command {
	g := &globals{stderr: stderr}
	root := &cobra.Command{
		Use:   "claimcheck",
		Short: "Move job payloads of any size through queues with the Claim-Check pattern",
		Long: `claimcheck checks payloads into object storage and queues a small ticket;
workers claim each payload by its ticket, verify its size and SHA-256, process
it, and check their result back in the same way.

The embedded default needs no servers: River on SQLite and a file store, both
in the data directory.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if g.brokerURL == "" && cmd.Flags().Changed("destination") {
				return usagef("--destination names an outbox destination of --broker; give --broker (or CLAIMCHECK_BROKER) too")
			}
			return g.validate()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	f := root.PersistentFlags()
	f.StringVar(&g.data, "data", envOr("CLAIMCHECK_DATA", "./claimcheck-data"), "data directory: embedded database, file store, temporary files (env CLAIMCHECK_DATA)")
	f.StringVar(&g.store, "store", envOr("CLAIMCHECK_STORE", ""), "object store URL, e.g. file:///abs/dir or mem:// (env CLAIMCHECK_STORE; default file store in the data directory)")
	f.StringVar(&g.database, "database", envOr("CLAIMCHECK_DATABASE", ""), "job database URL: sqlite:///abs/file.db or postgres://user@host:5432/db (env CLAIMCHECK_DATABASE; default SQLite in the data directory)")
	f.StringVar(&g.secretHex, "secret", envOr("CLAIMCHECK_SECRET", ""), "deployment secret, hex, at least 16 bytes: salts content-addressed keys per tenant and signs tickets; unsigned or altered tickets are then refused (env CLAIMCHECK_SECRET)")
	f.StringVar(&g.keeper, "keeper", envOr("CLAIMCHECK_KEEPER", ""), "key-encryption keeper URL for payload encryption (gocloud.dev/secrets: base64key://, awskms://), or \"none\"; default: a local key file created in <data>/keys (env CLAIMCHECK_KEEPER)")
	f.Int64Var(&g.inlineThreshold, "inline-threshold", envInt("CLAIMCHECK_INLINE_THRESHOLD", claimcheck.DefaultInlineThreshold, &g.envErrs), "largest payload carried inline in its ticket, in bytes (env CLAIMCHECK_INLINE_THRESHOLD)")
	f.BoolVar(&g.alwaysOffload, "always-offload", envBool("CLAIMCHECK_ALWAYS_OFFLOAD", &g.envErrs), "store every payload as an object, however small (env CLAIMCHECK_ALWAYS_OFFLOAD=1)")
	f.Int64Var(&g.maxPayloadSize, "max-payload-size", envInt("CLAIMCHECK_MAX_PAYLOAD_SIZE", 0, &g.envErrs), "reject payloads larger than this many bytes; 0 for no limit (env CLAIMCHECK_MAX_PAYLOAD_SIZE)")
	f.IntVar(&g.maxAttempts, "max-attempts", int(envInt("CLAIMCHECK_MAX_ATTEMPTS", pipeline.DefaultMaxAttempts, &g.envErrs)), "attempts of a job failing transiently before it is dead; set on the jobs a command submits (env CLAIMCHECK_MAX_ATTEMPTS)")
	f.StringVar(&g.brokerURL, "broker", envOr("CLAIMCHECK_BROKER", ""), "send jobs through this broker instead of the job database's queue: amqp://user:pass@host:5672/?queue=Q (RabbitMQ), nats://host:4222?stream=S (NATS JetStream) or sqs://?queue_url=…&dead_letter_queue_url=… (SQS; see docs/brokers.md); submit writes the outbox, work and run relay and consume (env CLAIMCHECK_BROKER)")
	f.StringVar(&g.destination, "destination", envOr("CLAIMCHECK_DESTINATION", "default"), "outbox destination of --broker: the outbox queue a relay publishes from, to the --broker it is given; give each broker queue its own destination (2 to 48 characters a-z, 0-9, single - or _ between them; env CLAIMCHECK_DESTINATION)")
	f.BoolVar(&g.json, "json", false, "print JSON instead of text")
	f.StringVar(&g.logLevel, "log-level", envOr("CLAIMCHECK_LOG_LEVEL", ""), "log the job engine and workers to standard error at debug, info, warn or error (env CLAIMCHECK_LOG_LEVEL; default off)")
	root.AddCommand(
		newSubmit(g), newWork(g), newRun(g), newJobs(g), newResult(g), newInspect(g), newDead(g), newBench(g), newURL(g), newServe(g), newMigrate(g),
		newRetention(g), newLifecycle(g), newSweep(g), newDoctor(g), newVerify(g), newRelay(g),
	)
	return root
}

// env is an opened data directory: store and pipeline.
type env struct {
	store  *claimcheck.Store
	pipe   *pipeline.Pipeline
	data   string
	keeper *secrets.Keeper
}

func (e *env) spoolDir() string { return filepath.Join(e.data, "tmp") }

func (e *env) Close() {
	e.pipe.Close()
	e.store.Close()
	if e.keeper != nil {
		e.keeper.Close()
	}
}

// open checks the data directory is writable, then opens the store and the
// pipeline. Every error names what to fix.
func (g *globals) open(ctx context.Context) (*env, error) {
	data, err := filepath.Abs(g.data)
	if err != nil {
		return nil, fmt.Errorf("data directory %q: %w", g.data, err)
	}
	if err := ensureWritable(data); err != nil {
		return nil, err
	}
	var secret []byte
	if g.secretHex != "" {
		if secret, err = hex.DecodeString(g.secretHex); err != nil || len(secret) < 16 {
			return nil, usagef("--secret must be at least 16 bytes written in hex (e.g. from: openssl rand -hex 32)")
		}
	}
	storeURL := g.store
	if strings.HasPrefix(storeURL, "mem://") && !g.memOK {
		return nil, usagef("--store mem:// keeps objects only inside one process, so a later command would find every payload missing; use it with run or bench, or use a file:// or s3:// store")
	}
	if storeURL == "" {
		storeURL = "file://" + filepath.ToSlash(filepath.Join(data, "objects"))
	}
	database := g.database
	if database == "" {
		dbPath := filepath.Join(data, "claimcheck.db")
		if _, err := os.Stat(dbPath); g.readOnly && errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no claimcheck data in %s (no job database there): check --data or CLAIMCHECK_DATA, or submit jobs first", data)
		}
		database = "sqlite://" + filepath.ToSlash(dbPath)
	}
	threshold := g.inlineThreshold
	if threshold == 0 {
		threshold = -1 // --inline-threshold 0: nothing travels inline
	}
	keeper, err := openKeeper(ctx, g.keeper, data)
	if err != nil {
		return nil, err
	}
	store, err := claimcheck.OpenStore(ctx, storeURL, &claimcheck.Options{
		Secret:          secret,
		SignTickets:     secret != nil,
		Keeper:          keeper,
		Tenants:         g.tenants,
		InlineThreshold: threshold,
		AlwaysOffload:   g.alwaysOffload,
		MaxPayloadSize:  g.maxPayloadSize,
		SpoolDir:        (&env{data: data}).spoolDir(),
	})
	if err != nil {
		if keeper != nil {
			keeper.Close()
		}
		return nil, err
	}
	logger, err := g.logger()
	if err != nil {
		store.Close()
		return nil, err
	}
	pipe, err := pipeline.Open(ctx, pipeline.Config{Database: database, Store: store, MaxAttempts: g.maxAttempts, Logger: logger, SQLiteCacheKiB: g.sqliteCacheKiB, ReadOnly: g.readOnly})
	if err != nil {
		store.Close()
		return nil, err
	}
	return &env{store: store, pipe: pipe, data: data, keeper: keeper}, nil
}

// logger is the --log-level logger on standard error, or nil when off.
func (g *globals) logger() (*slog.Logger, error) {
	if g.logLevel == "" {
		return nil, nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, usagef("--log-level %q: use debug, info, warn or error", g.logLevel)
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level})), nil
}

// openExisting opens the data of a command that only reads: a missing job
// database is an error rather than a new empty one.
func (g *globals) openExisting(ctx context.Context) (*env, error) {
	g.readOnly = true
	return g.open(ctx)
}

// withJob is the RunE of a command whose one argument is a job id: it parses
// the id, opens the existing data and calls fn.
func (g *globals) withJob(fn func(cmd *cobra.Command, e *env, id int64) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		id, err := pipeline.ParseJobID(args[0])
		if err != nil {
			return usagef("%v", err)
		}
		e, err := g.openExisting(cmd.Context())
		if err != nil {
			return err
		}
		defer e.Close()
		return fn(cmd, e, id)
	}
}

// ensureWritable creates dir if needed and proves a file can be written in
// it, so a read-only data directory fails up front with a clear message
// rather than half-way through a job.
func ensureWritable(dir string) error {
	hint := "choose another with --data or CLAIMCHECK_DATA"
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("data directory %s cannot be created (%v); %s", dir, unwrapPath(err), hint)
	}
	f, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable (%v); %s", dir, unwrapPath(err), hint)
	}
	f.Close()
	return os.Remove(f.Name())
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func ctxTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

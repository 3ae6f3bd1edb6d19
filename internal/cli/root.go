// Package cli is the claimcheck command: cobra commands over the root
// package and the job pipeline. cmd/claimcheck calls Execute.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Execute runs the claimcheck command with os.Args and returns the process
// exit code.
func Execute() int { return execute(nil) }

// execute is Execute, with ext (if any) applied to the command tree.
func execute(ext Extension) int {
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
	return run(ctx, ext, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
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
	return run(ctx, nil, args, stdin, stdout, stderr)
}

// run is Run, with ext (if any) applied to the command tree.
func run(ctx context.Context, ext Extension, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Workers, their --exec commands and the logger write concurrently.
	stdout, stderr = &syncWriter{w: stdout}, &syncWriter{w: stderr}
	root, g := newRootGlobals(stderr)
	if ext != nil {
		ext(root, &Lab{g: g})
	}
	defer g.closeTelemetry(ctx)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	code := exitCode(err)
	msg := strings.TrimPrefix(err.Error(), "claimcheck: ")
	if g.json {
		// One JSON object on standard error, as --json promises for output.
		reason := claimcheck.Reason(err)
		if code == 2 && reason == claimcheck.ReasonTransient {
			reason = claimcheck.ReasonConfig // bad input whose error carries no class
		}
		_ = printJSON(stderr, map[string]any{"error": msg, "reason": reason, "permanent": claimcheck.IsPermanent(err), "exit": code})
	} else {
		fmt.Fprintln(stderr, "claimcheck:", msg)
	}
	return code
}

// exitCode is Run's exit status for err, the table of docs/guide.md
// ("Exit status"): 2 for bad input refused before anything ran (a flag, an
// argument, an input file missing or empty, an invalid tenant, name or
// configuration), 1 for any other failure.
func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, claimcheck.ErrConfig) || errors.Is(err, claimcheck.ErrTicketInvalid) ||
		errors.Is(err, pipeline.ErrEmptyPayload) || strings.HasPrefix(err.Error(), "unknown command") {
		return 2
	}
	return 1
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

func newRoot(stderr io.Writer) *cobra.Command {
	root, _ := newRootGlobals(stderr)
	return root
}

// newRootGlobals is newRoot, also returning the globals its commands share.
func newRootGlobals(stderr io.Writer) (*cobra.Command, *globals) {
	g := &globals{stderr: stderr, tel: &telState{}}
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
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// work --exec wc -c: pflag takes the command's -c for work's own.
		if f := c.Flags().Lookup("exec"); f != nil && f.Changed && c.ArgsLenAtDash() < 0 {
			return usagef("%v: if it is the --exec command's flag, put -- before the command: work --kind K --exec -- CMD ARGS...", err)
		}
		return usageError{err}
	})
	f := root.PersistentFlags()
	f.StringVar(&g.data, "data", envOr("CLAIMCHECK_DATA", "./claimcheck-data"), "data directory: embedded database, file store, temporary files (env CLAIMCHECK_DATA)")
	stores := &storeFlag{g: g}
	stores.setEnv(os.Getenv("CLAIMCHECK_STORE"))
	f.Var(stores, "store", "object store URL, e.g. file:///abs/dir or mem://, or NAME=URL for a named store (repeatable: one default store and any named ones; workers take only the jobs of their stores; env CLAIMCHECK_STORE, several separated by spaces; default file store in the data directory)")
	f.StringVar(&g.database, "database", envOr("CLAIMCHECK_DATABASE", ""), "job database URL: sqlite:///abs/file.db or postgres://user@host:5432/db (env CLAIMCHECK_DATABASE; default SQLite in the data directory); a SQLite file that does not exist is created only by the commands that set up or use a deployment (submit, work, run, relay, doctor, verify, migrate, bench), refused by the others")
	f.StringVar(&g.secretHex, "secret", envOr("CLAIMCHECK_SECRET", ""), "deployment secret, hex, at least 16 bytes: salts content-addressed keys per tenant and signs tickets; unsigned or altered tickets are then refused (env CLAIMCHECK_SECRET)")
	f.StringVar(&g.keeper, "keeper", envOr("CLAIMCHECK_KEEPER", ""), "key-encryption keeper URL for payload encryption (gocloud.dev/secrets: base64key://, awskms://), or \"none\"; default: a local key file created in <data>/keys (env CLAIMCHECK_KEEPER)")
	f.Int64Var(&g.inlineThreshold, "inline-threshold", envInt("CLAIMCHECK_INLINE_THRESHOLD", claimcheck.DefaultInlineThreshold, &g.envErrs), "largest payload carried inline in its ticket, in bytes (env CLAIMCHECK_INLINE_THRESHOLD)")
	f.BoolVar(&g.alwaysOffload, "always-offload", envBool("CLAIMCHECK_ALWAYS_OFFLOAD", &g.envErrs), "store every payload as an object, however small (env CLAIMCHECK_ALWAYS_OFFLOAD=1)")
	f.Int64Var(&g.maxPayloadSize, "max-payload-size", envInt("CLAIMCHECK_MAX_PAYLOAD_SIZE", 0, &g.envErrs), "reject payloads larger than this many bytes; 0 for no limit (env CLAIMCHECK_MAX_PAYLOAD_SIZE)")
	f.IntVar(&g.maxAttempts, "max-attempts", int(envInt("CLAIMCHECK_MAX_ATTEMPTS", pipeline.DefaultMaxAttempts, &g.envErrs)), "attempts of a job failing transiently before it is dead; set on the jobs a command submits (env CLAIMCHECK_MAX_ATTEMPTS)")
	f.StringVar(&g.brokerURL, "broker", envOr("CLAIMCHECK_BROKER", ""), "send jobs through this broker instead of the job database's queue: amqp://user:pass@host:5672/?queue=Q (RabbitMQ), nats://host:4222?stream=S (NATS JetStream) or sqs://?queue_url=…&dead_letter_queue_url=… (SQS; see docs/brokers.md); submit writes the outbox, work and run relay and consume (env CLAIMCHECK_BROKER)")
	f.StringVar(&g.destination, "destination", envOr("CLAIMCHECK_DESTINATION", "default"), "outbox destination of --broker: the outbox queue a relay publishes from, to the --broker it is given; give each broker queue its own destination (2 to "+strconv.Itoa(pipeline.MaxDestinationLen)+" characters a-z, 0-9, single - or _ between them; env CLAIMCHECK_DESTINATION)")
	f.BoolVar(&g.json, "json", false, "print JSON instead of text")
	f.StringVar(&g.logLevel, "log-level", envOr("CLAIMCHECK_LOG_LEVEL", ""), "log the job engine and workers to standard error at debug, info, warn or error (env CLAIMCHECK_LOG_LEVEL; default off)")
	_ = root.RegisterFlagCompletionFunc("log-level", completeWords("debug", "info", "warn", "error"))
	f.StringVar(&g.logFormat, "log-format", envOr("CLAIMCHECK_LOG_FORMAT", "text"), "log lines as text (key=value) or json, one object a line (env CLAIMCHECK_LOG_FORMAT)")
	_ = root.RegisterFlagCompletionFunc("log-format", completeWords("text", "json"))
	root.AddCommand(
		newSubmit(g), newWork(g), newRun(g), newJobs(g), newResult(g), newInspect(g), newCancel(g), newDead(g), newBench(g), newURL(g), newServe(g), newMigrate(g), newTokens(g),
		newRetention(g), newLifecycle(g), newSweep(g), newDoctor(g), newVerify(g), newRelay(g), newKeys(g), newVersion(g),
	)
	return root, g
}

// Root is the command tree as a user meets it, for generating its reference
// (internal/clidoc): flag defaults read from CLAIMCHECK_* variables show
// whatever the environment holds, so a generator clears them first.
func Root() *cobra.Command { return newRoot(io.Discard) }

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/internal/pdfinfo"
	"github.com/claimcheck/claimcheck/pipeline"
)

// builtinHandlers are the kinds a worker can serve without --exec.
func builtinHandlers() map[string]claimcheck.Handler {
	return map[string]claimcheck.Handler{pdfinfo.Kind: pdfinfo.Handler()}
}

// workOptions are the options of work.
type workOptions struct {
	g                                *globals
	kind                             string
	tenants                          []string
	concurrency                      int
	untilEmpty, noRelay, deleteOnAck bool
	strict                           bool
	pointerBucket, adoptTenant       string
	rawTenant                        string
	idle, drainTimeout               time.Duration
	httpAddr                         string   // --http
	exec                             bool     // --exec was given
	argv                             []string // the command after --, with --exec
	args                             []string // other positional arguments
	brokerOnly                       []string // the flags given that work with --broker only
}

// Validate checks the kind, the handler (built in, or an --exec command
// that can be run), the broker-only flags and --concurrency.
func (o *workOptions) Validate() error {
	if o.kind == "" {
		return usagef("work needs --kind")
	}
	if err := pipeline.ValidateKind(o.kind); err != nil {
		return usagef("%v", err)
	}
	switch {
	case o.exec && len(o.argv) == 0:
		return usagef("--exec needs a command after --, e.g. work --kind %s --exec -- wc -c", o.kind)
	case o.exec:
		if _, err := exec.LookPath(o.argv[0]); err != nil {
			return usagef("--exec command %q cannot be run: %v", o.argv[0], unwrapPath(err))
		}
	case len(o.args) > 0:
		return usagef("unexpected arguments %q (a command goes after --exec --)", strings.Join(o.args, " "))
	case builtinHandlers()[o.kind] == nil:
		return usagef("no built-in handler for kind %q: give one with --exec -- CMD, or use kind %s", o.kind, pdfinfo.Kind)
	}
	if o.g.brokerURL == "" && len(o.brokerOnly) > 0 {
		return usagef("--%s works with --broker only", o.brokerOnly[0])
	}
	if o.concurrency < 1 || o.concurrency > 1000 {
		return usagef("--concurrency %d: use 1 to 1000", o.concurrency)
	}
	if err := validateHTTPAddr(o.httpAddr); err != nil {
		return err
	}
	if o.rawTenant != "" {
		if err := claimcheck.ValidateTenant(o.rawTenant); err != nil {
			return usagef("--raw-tenant: %v", err)
		}
	}
	if o.adoptTenant != "" {
		if err := claimcheck.ValidateTenant(o.adoptTenant); err != nil {
			return usagef("--adopt-tenant: %v", err)
		}
		if o.pointerBucket == "" {
			return usagef("--adopt-tenant needs --pointer-bucket")
		}
	}
	return nil
}

// bind records the positional arguments (the command after -- with
// --exec) and which flags were given.
func (o *workOptions) bind(cmd *cobra.Command, args []string) {
	o.exec, o.brokerOnly = cmd.Flags().Changed("exec"), nil
	for _, f := range []string{"no-relay", "idle", "delete-on-ack", "pointer-bucket", "adopt-tenant", "raw-tenant"} {
		if cmd.Flags().Changed(f) {
			o.brokerOnly = append(o.brokerOnly, f)
		}
	}
	o.argv, o.args = nil, args
	if dash := cmd.ArgsLenAtDash(); o.exec && dash >= 0 && dash < len(args) {
		o.argv, o.args = args[dash:], nil
	}
}

func newWork(g *globals) *cobra.Command {
	o := &workOptions{g: g}
	c := &cobra.Command{
		Use:   "work --kind K [--concurrency N] [--until-empty] [--exec -- CMD ARGS...]",
		Short: "Run workers for one kind",
		Long: `Run workers for kind K. Each job's payload is claimed and verified before its
handler runs; a missing or corrupt payload dead-letters the job at once.

Built-in kinds: pdf-info. For any other kind, give a command after --exec --:
the verified payload is its standard input, its standard output is checked in
as the job's result, exit 0 is success, exit 65 (EX_DATAERR) is a permanent
failure (dead letter), and any other failure is retried with backoff.

With --broker, the worker consumes the broker instead, with the same claim,
verification and failure classes: permanent failures go to the broker's
dead-letter destination on the first attempt. It also relays the outbox of
--destination (unless --no-relay), and records each outcome in the job
database's inbox, which also makes a message delivered twice run once.
--until-empty then stops once the outbox is empty and the broker has
delivered nothing for --idle.`,
		RunE: runE(o, o.bind),
	}
	c.Flags().StringVar(&o.kind, "kind", "", "job kind to work (required)")
	c.Flags().StringArrayVar(&o.tenants, "tenant", nil, "work only this tenant's jobs (repeatable): other tenants' jobs are left in their queue for a worker that serves them, nothing fetched and no attempt spent; a ticket of another tenant inside a served tenant's job is refused (ticket-forbidden) before any fetch")
	c.Flags().IntVar(&o.concurrency, "concurrency", 2, "jobs worked at once")
	c.Flags().StringVar(&o.httpAddr, "http", "", "serve /metrics (Prometheus), /healthz and /readyz (job database, store, broker) on this host:port while working")
	c.Flags().BoolVar(&o.strict, "strict", false, "refuse to start (exit 2) when the bucket's lifecycle expires payloads/ or results/ sooner than claimcheck retention requires (default: a warning on standard error)")
	c.Flags().BoolVar(&o.untilEmpty, "until-empty", false, "return once no job of the kind is waiting, running or due for a retry")
	c.Flags().BoolVar(&o.noRelay, "no-relay", false, "with --broker: consume only; another process relays the outbox")
	c.Flags().BoolVar(&o.deleteOnAck, "delete-on-ack", false, "with --broker: delete a payload's object once its message is acknowledged and no other subscriber or job refers to it (default: retention and sweep clean up)")
	c.Flags().StringVar(&o.pointerBucket, "pointer-bucket", "", "with --broker: accept AWS extended-client payload pointers naming this bucket (the store's), as jobs of --kind")
	c.Flags().StringVar(&o.rawTenant, "raw-tenant", "", "with --broker: take a body that is no ticket, pointer or SNS envelope (an AWS-format producer's payload below its threshold) as the payload itself, for this tenant, as a job of --kind; verified by nothing but its own bytes")
	c.Flags().StringVar(&o.adoptTenant, "adopt-tenant", "", "with --pointer-bucket: accept pointers without claimcheck's digest (Java/Python producers) for this tenant: read once, size-checked, checked in, then verified")
	c.Flags().DurationVar(&o.idle, "idle", 3*time.Second, "with --broker --until-empty: how long the broker must deliver nothing, counted also from when a message this worker retried with a delay is due again")
	c.Flags().DurationVar(&o.drainTimeout, "drain-timeout", pipeline.DefaultDrainTimeout, "on SIGTERM or interrupt: how long running handlers may finish before their jobs go back to the queue (attempt not spent); a second signal stops at once")
	c.Flags().Bool("exec", false, "run the command after -- for each job (payload on stdin, result on stdout)")
	return c
}

// brokerSummary prints what work --broker did.
func brokerSummary(w io.Writer, asJSON bool, kind string, t *brokerTally) error {
	if !asJSON {
		fmt.Fprintf(w, "worked kind %s via the broker: succeeded %d, retried %d, dead-lettered %d, duplicates skipped %d\n",
			kind, t.acked.Load(), t.retried.Load(), t.dead.Load(), t.duplicates.Load())
		return nil
	}
	return printJSON(w, map[string]any{"kind": kind, "broker": true, "succeeded": t.acked.Load(), "retried": t.retried.Load(),
		"dead": t.dead.Load(), "duplicates": t.duplicates.Load()})
}

func (o *workOptions) run(ctx context.Context, s streams) error {
	g, kind := o.g, o.kind
	e, err := g.open(ctx, openOptions{tenants: o.tenants})
	if err != nil {
		return err
	}
	defer e.Close()
	if g.brokerURL != "" && len(e.stores) > 1 {
		return usagef("work --broker works the tickets of one store, and this worker has %d (%s): run one worker per store, each with that store as its only --store and its own queue (docs/stores.md, \"Named stores\")", len(e.stores), e.storeLabels())
	}
	if err := e.startupChecks(ctx, g, s.err, o.strict); err != nil {
		return e.refuse(err)
	}
	if len(e.specs) > 1 || e.specs[0].name != "" {
		which := "store"
		if len(e.specs) > 1 {
			which = "stores"
		}
		fmt.Fprintf(s.err, "working the jobs of %s %s only; jobs of other stores stay in their queues for workers that have them\n", which, e.storeLabels())
	}
	logger, err := o.g.logger()
	if err != nil {
		return err
	}
	h := builtinHandlers()[o.kind]
	if o.exec {
		h = execHandler(o.argv, e.spoolDir(), s.err, logger)
	}
	var done, failed atomic.Int64
	var mu sync.Mutex
	var dead []int64 // bounded by the dead letters of this run
	var leftJobs sync.Map
	stderr := s.err
	opts := pipeline.WorkOptions{
		Handlers:     map[string]claimcheck.Handler{kind: h},
		Concurrency:  o.concurrency,
		UntilEmpty:   o.untilEmpty,
		DrainTimeout: o.drainTimeout,
		Abort:        takeAbort(ctx),
		Notify:       func(msg string) { fmt.Fprintln(stderr, msg) },
		OnDone: func(out pipeline.Outcome) {
			switch out.State {
			case pipeline.JobCompleted:
				done.Add(1)
			case pipeline.JobReleased:
			case pipeline.JobLeft:
				// Another tenant's job (--tenant): left in its queue for
				// a worker serving that tenant; said once per job.
				if _, seen := leftJobs.LoadOrStore(out.JobID, true); !seen {
					fmt.Fprintf(stderr, "job %d: tenant not served by this worker (--tenant); left in its queue for a worker that serves it, no attempt spent\n", out.JobID)
				}
			default:
				failed.Add(1)
				if !logsAttempt(logger, out.State) {
					fmt.Fprintf(stderr, "job %d%s: attempt %d failed (%s), %s%s: %v\n", out.JobID, messageNote(out.MessageID), out.Attempt, out.Reason, out.State, nextTryNote(out), out.Err)
				}
				if out.State == pipeline.JobDead {
					mu.Lock()
					dead = append(dead, out.JobID)
					mu.Unlock()
				}
			}
		},
	}
	var tally *brokerTally
	if g.brokerURL != "" {
		tr, err := g.openBrokerWaiting(ctx, e, stderr, kind)
		if err != nil {
			return err
		}
		defer tr.Close()
		src := brokerSource(g, tr, stderr, !o.noRelay)
		src.Idle, src.DeleteOnAck = o.idle, o.deleteOnAck
		src.Consume = broker.ConsumeOptions{PointerBucket: o.pointerBucket, AdoptTenant: o.adoptTenant, RawTenant: o.rawTenant}
		if src.Consume.PointerBucket == "" {
			// A destination declared format=aws carries pointers to the
			// store's bucket (its relay writes them).
			f, _ := broker.FormatOf(g.brokerURL) // checked by broker.Open
			src.Consume.PointerBucket = f.PointerBucket
		}
		if src.Consume.PointerBucket != "" || o.rawTenant != "" {
			src.Consume.DefaultKind = kind // AWS producers set no kind
		}
		tally = &brokerTally{}
		src.OnSettled = tally.add
		opts.Broker = src
	}
	if o.httpAddr != "" {
		var ping func(context.Context) error
		if opts.Broker != nil {
			tr := opts.Broker.Transport
			ping = func(ctx context.Context) error { return broker.Ping(ctx, tr) }
		}
		tel, err := g.telemetry(ctx)
		if err != nil {
			return err
		}
		stop, err := serveObservability(ctx, o.httpAddr, tel, e.readyChecks(ping), stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := e.pipe.Work(ctx, opts); err != nil {
		return err
	}
	if tally != nil {
		if err := brokerSummary(s.out, g.json, kind, tally); err != nil {
			return err
		}
		if n := tally.dead.Load(); n > 0 {
			return brokerDeadError(n, dead)
		}
		return nil
	}
	// Jobs this run sent to the dead letters make the command fail.
	slices.Sort(dead)
	if dead == nil {
		dead = []int64{} // "dead": [] in JSON, not null
	}
	if g.json {
		if err := printJSON(s.out, map[string]any{"kind": kind, "succeeded": done.Load(), "failed": failed.Load(), "dead": dead}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(s.out, "worked kind %s: attempts succeeded %d, failed %d; jobs dead %d\n", kind, done.Load(), failed.Load(), len(dead))
	}
	if len(dead) > 0 {
		return fmt.Errorf("%s went to the dead letters (ids %v); see: claimcheck dead", plural(len(dead), "job"), dead)
	}
	return nil
}

// nextTryNote is ", next try in 8s" for an attempt retried or waiting
// with a known delay, else "".
func nextTryNote(o pipeline.Outcome) string {
	if o.NextTry <= 0 || (o.State != pipeline.JobWaiting && o.State != pipeline.JobRetrying) {
		return ""
	}
	return ", next try in " + o.NextTry.Round(100*time.Millisecond).String()
}

// brokerDeadError is work --broker's failure when n messages were
// dead-lettered: jobs holds the outbox entry (job id) of each, 0 for a
// message no outbox entry sent (an AWS-format or other foreign producer's).
// claimcheck dead lists the relayed entries only (the job database's
// inbox); the others are only in the broker's dead-letter destination, and
// the error says so rather than point at a listing that omits them.
func brokerDeadError(n int64, jobs []int64) error {
	var relayed []int64
	for _, id := range jobs {
		if id > 0 {
			relayed = append(relayed, id)
		}
	}
	slices.Sort(relayed)
	foreign := n - int64(len(relayed))
	msg := plural(int(n), "message") + " went to the broker's dead-letter destination"
	if len(relayed) > 0 {
		msg += fmt.Sprintf("; %d relayed from the outbox (jobs %v): see: claimcheck dead", len(relayed), relayed)
	}
	if foreign > 0 {
		msg += fmt.Sprintf("; %d sent by producers outside the job database (no outbox entry, such as AWS extended clients), which claimcheck dead does not list: read them in the broker's dead-letter queue (the reason is their %s attribute)", foreign, broker.AttrReason)
	}
	return errors.New(msg)
}

package cli

import (
	"fmt"
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

func newWork(g *globals) *cobra.Command {
	var kind string
	var concurrency int
	var untilEmpty, noRelay, deleteOnAck, strict bool
	var pointerBucket, adoptTenant string
	var idle, drainTimeout time.Duration
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
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind == "" {
				return usagef("work needs --kind")
			}
			if err := pipeline.ValidateKind(kind); err != nil {
				return usagef("%v", err)
			}
			var h claimcheck.Handler
			var argv []string
			dash := cmd.ArgsLenAtDash()
			switch {
			case cmd.Flags().Changed("exec") && (dash < 0 || dash >= len(args)):
				return usagef("--exec needs a command after --, e.g. work --kind %s --exec -- wc -c", kind)
			case cmd.Flags().Changed("exec"):
				argv = args[dash:]
				if _, err := exec.LookPath(argv[0]); err != nil {
					return usagef("--exec command %q cannot be run: %v", argv[0], unwrapPath(err))
				}
			case len(args) > 0:
				return usagef("unexpected arguments %q (a command goes after --exec --)", strings.Join(args, " "))
			default:
				h = builtinHandlers()[kind]
				if h == nil {
					return usagef("no built-in handler for kind %q: give one with --exec -- CMD, or use kind %s", kind, pdfinfo.Kind)
				}
			}
			if g.brokerURL == "" {
				for _, f := range []string{"no-relay", "idle", "delete-on-ack", "pointer-bucket", "adopt-tenant"} {
					if cmd.Flags().Changed(f) {
						return usagef("--%s works with --broker only", f)
					}
				}
			}
			if concurrency < 1 || concurrency > 1000 {
				return usagef("--concurrency %d: use 1 to 1000", concurrency)
			}
			e, err := g.open(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			if err := e.startupChecks(cmd.Context(), g, cmd.ErrOrStderr(), strict); err != nil {
				return err
			}
			if argv != nil {
				h = execHandler(argv, e.spoolDir(), cmd.ErrOrStderr())
			}
			var done, failed atomic.Int64
			var mu sync.Mutex
			var dead []int64 // bounded by the dead letters of this run
			var leftJobs sync.Map
			stderr := cmd.ErrOrStderr()
			opts := pipeline.WorkOptions{
				Handlers:     map[string]claimcheck.Handler{kind: h},
				Concurrency:  concurrency,
				UntilEmpty:   untilEmpty,
				DrainTimeout: drainTimeout,
				Abort:        takeAbort(cmd.Context()),
				Notify:       func(msg string) { fmt.Fprintln(stderr, msg) },
				OnDone: func(o pipeline.Outcome) {
					switch o.State {
					case pipeline.JobCompleted:
						done.Add(1)
					case pipeline.JobReleased:
					case pipeline.JobLeft:
						// Another tenant's job (--tenant): left in its queue for
						// a worker serving that tenant; said once per job.
						if _, seen := leftJobs.LoadOrStore(o.JobID, true); !seen {
							fmt.Fprintf(stderr, "job %d: tenant not served by this worker (--tenant); left in its queue for a worker that serves it, no attempt spent\n", o.JobID)
						}
					default:
						failed.Add(1)
						fmt.Fprintf(stderr, "job %d%s: attempt %d failed (%s), %s: %v\n", o.JobID, messageNote(o.MessageID), o.Attempt, o.Reason, o.State, o.Err)
						if o.State == pipeline.JobDead {
							mu.Lock()
							dead = append(dead, o.JobID)
							mu.Unlock()
						}
					}
				},
			}
			var tally *brokerTally
			if g.brokerURL != "" {
				if adoptTenant != "" {
					if err := claimcheck.ValidateTenant(adoptTenant); err != nil {
						return usagef("--adopt-tenant: %v", err)
					}
					if pointerBucket == "" {
						return usagef("--adopt-tenant needs --pointer-bucket")
					}
				}
				tr, err := g.openBrokerWaiting(cmd.Context(), e, stderr, kind)
				if err != nil {
					return err
				}
				defer tr.Close()
				src := brokerSource(g, tr, stderr, !noRelay)
				src.Idle, src.DeleteOnAck = idle, deleteOnAck
				src.Consume = broker.ConsumeOptions{PointerBucket: pointerBucket, AdoptTenant: adoptTenant}
				if pointerBucket != "" {
					src.Consume.DefaultKind = kind // AWS producers set no kind
				}
				tally = &brokerTally{}
				src.OnSettled = tally.add
				opts.Broker = src
			}
			if err := e.pipe.Work(cmd.Context(), opts); err != nil {
				return err
			}
			if tally != nil {
				if err := brokerSummary(cmd, g, kind, tally); err != nil {
					return err
				}
				if n := tally.dead.Load(); n > 0 {
					return fmt.Errorf("%d messages went to the broker's dead-letter destination (jobs %v); see: claimcheck dead", n, dead)
				}
				return nil
			}
			// Jobs this run sent to the dead letters make the command fail.
			slices.Sort(dead)
			if g.json {
				if err := printJSON(cmd.OutOrStdout(), map[string]any{"kind": kind, "succeeded": done.Load(), "failed": failed.Load(), "dead": dead}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "worked kind %s: attempts succeeded %d, failed %d; jobs dead %d\n", kind, done.Load(), failed.Load(), len(dead))
			}
			if len(dead) > 0 {
				return fmt.Errorf("%d jobs went to the dead letters (ids %v); see: claimcheck dead", len(dead), dead)
			}
			return nil
		},
	}
	c.Flags().StringVar(&kind, "kind", "", "job kind to work (required)")
	c.Flags().StringArrayVar(&g.tenants, "tenant", nil, "work only this tenant's jobs (repeatable): other tenants' jobs are left in their queue for a worker that serves them, nothing fetched and no attempt spent; a ticket of another tenant inside a served tenant's job is refused (ticket-forbidden) before any fetch")
	c.Flags().IntVar(&concurrency, "concurrency", 2, "jobs worked at once")
	c.Flags().BoolVar(&strict, "strict", false, "refuse to start (exit 2) when the bucket's lifecycle expires payloads/ or results/ sooner than claimcheck retention requires (default: a warning on standard error)")
	c.Flags().BoolVar(&untilEmpty, "until-empty", false, "return once no job of the kind is waiting, running or due for a retry")
	c.Flags().BoolVar(&noRelay, "no-relay", false, "with --broker: consume only; another process relays the outbox")
	c.Flags().BoolVar(&deleteOnAck, "delete-on-ack", false, "with --broker: delete a payload's object once its message is acknowledged and no other subscriber or job refers to it (default: retention and sweep clean up)")
	c.Flags().StringVar(&pointerBucket, "pointer-bucket", "", "with --broker: accept AWS extended-client payload pointers naming this bucket (the store's), as jobs of --kind")
	c.Flags().StringVar(&adoptTenant, "adopt-tenant", "", "with --pointer-bucket: accept pointers without claimcheck's digest (Java/Python producers) for this tenant: read once, size-checked, checked in, then verified")
	c.Flags().DurationVar(&idle, "idle", 3*time.Second, "with --broker --until-empty: how long the broker must deliver nothing")
	c.Flags().DurationVar(&drainTimeout, "drain-timeout", pipeline.DefaultDrainTimeout, "on SIGTERM or interrupt: how long running handlers may finish before their jobs go back to the queue (attempt not spent); a second signal stops at once")
	c.Flags().Bool("exec", false, "run the command after -- for each job (payload on stdin, result on stdout)")
	return c
}

// brokerSummary prints what work --broker did.
func brokerSummary(cmd *cobra.Command, g *globals, kind string, t *brokerTally) error {
	if g.json {
		return printJSON(cmd.OutOrStdout(), map[string]any{"kind": kind, "broker": true, "succeeded": t.acked.Load(), "retried": t.retried.Load(),
			"dead": t.dead.Load(), "duplicates": t.duplicates.Load()})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "worked kind %s via the broker: succeeded %d, retried %d, dead-lettered %d, duplicates skipped %d\n",
		kind, t.acked.Load(), t.retried.Load(), t.dead.Load(), t.duplicates.Load())
	return nil
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	_ "github.com/claimcheck/claimcheck/broker/natsjs"   // nats://
	_ "github.com/claimcheck/claimcheck/broker/rabbitmq" // amqp://, amqps://
	_ "github.com/claimcheck/claimcheck/broker/sqs"      // sqs://
	"github.com/claimcheck/claimcheck/pipeline"
)

// openBroker opens --broker and checks, at start-up, that no ticket of
// kinds can exceed its maximum message size.
func (g *globals) openBroker(ctx context.Context, e *env, kinds ...string) (broker.Transport, error) {
	return g.openBrokerWithin(ctx, e, 30*time.Second, kinds...)
}

// openBrokerWithin is openBroker giving up after d. Configuration errors
// are usage errors (exit 2); an unreachable broker is a plain error.
func (g *globals) openBrokerWithin(ctx context.Context, e *env, d time.Duration, kinds ...string) (broker.Transport, error) {
	octx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tr, err := broker.Open(octx, g.brokerURL)
	if err != nil {
		if errors.Is(err, claimcheck.ErrConfig) {
			return nil, usagef("--broker: %v", err)
		}
		return nil, fmt.Errorf("--broker: %w", err)
	}
	if len(kinds) == 0 {
		kinds = []string{strings.Repeat("k", 64)} // the longest kind: any entry fits
	}
	if err := broker.CheckConfig(e.store, tr, kinds...); err != nil {
		tr.Close()
		return nil, usagef("--broker: %v", err)
	}
	return tr, nil
}

// openBrokerWaiting is openBroker for long-running commands: while the
// broker is unreachable (not misconfigured) it says so and tries again,
// 1 s doubling to 30 s, until ctx is done.
func (g *globals) openBrokerWaiting(ctx context.Context, e *env, stderr io.Writer, kinds ...string) (broker.Transport, error) {
	for try := 1; ; try++ {
		tr, err := g.openBroker(ctx, e, kinds...)
		if err == nil {
			if try > 1 {
				fmt.Fprintln(stderr, "broker reachable")
			}
			return tr, nil
		}
		if errors.As(err, new(usageError)) || ctx.Err() != nil {
			return nil, err
		}
		if try == 1 || try%10 == 0 {
			fmt.Fprintf(stderr, "%v; trying again (interrupt to give up)\n", err)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(broker.Backoff(time.Second, 30*time.Second, try)):
		}
	}
}

// brokerTally counts what a broker consumer did.
type brokerTally struct {
	acked, retried, dead, duplicates, deleted atomic.Int64
}

// add counts one settled delivery (BrokerSource.OnSettled).
func (t *brokerTally) add(o broker.Outcome) {
	switch {
	case o.Duplicate:
		t.duplicates.Add(1)
	case o.Action == broker.Acked:
		t.acked.Add(1)
	case o.Action == broker.Retried:
		t.retried.Add(1)
	case o.Action == broker.DeadLettered:
		t.dead.Add(1)
	}
	if o.Deleted {
		t.deleted.Add(1)
	}
}

// brokerSource is the broker source of work and run --broker over tr: the
// relay of --destination (if relay), and the consumer's and relay's
// troubles reported on stderr.
func brokerSource(g *globals, tr broker.Transport, stderr io.Writer, relay bool) *pipeline.BrokerSource {
	src := &pipeline.BrokerSource{Transport: tr, OnError: func(err error) { fmt.Fprintln(stderr, err) }}
	if relay {
		var outage atomic.Bool
		src.Relay = g.destination
		src.OnRelayed = func(id int64, err error) {
			if errors.Is(err, pipeline.ErrNotRelayable) {
				fmt.Fprintf(stderr, "relay: job %d is dead (see claimcheck dead): %v\n", id, err)
				return
			}
			if err != nil && outage.CompareAndSwap(false, true) {
				fmt.Fprintf(stderr, "relay: job %d not confirmed by the broker, kept in the outbox and retried: %v\n", id, err)
			}
			if err == nil && outage.CompareAndSwap(true, false) {
				fmt.Fprintln(stderr, "relay: the broker confirms again")
			}
		}
	}
	return src
}

// messageNote names a broker message in a job's line, "" for a job of the
// job database.
func messageNote(id string) string {
	if id == "" {
		return ""
	}
	return " (message " + id + ")"
}

// The relay's memory settings: SQLite's page cache in KiB, and the Go
// garbage collector's GOGC (a live heap of a few MiB makes collections
// cheap).
const (
	relaySQLiteCacheKiB = 256
	relayGCPercent      = 25
)

func newRelay(g *globals) *cobra.Command {
	var untilEmpty bool
	var batch int
	c := &cobra.Command{
		Use:   "relay --broker URL [--destination D] [--until-empty]",
		Short: "Publish the outbox's tickets to the broker",
		Long: `Publish the tickets waiting in the outbox of --destination to --broker, each
counted as sent only once the broker confirms it. Payloads are never read.
While the broker is unreachable, entries stay in the outbox and are retried;
they go out when it returns. work --broker and run --broker relay too.`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.brokerURL == "" {
				return usagef("relay needs --broker (or CLAIMCHECK_BROKER)")
			}
			if batch < 1 || batch > 10000 {
				return usagef("--batch %d: use 1 to 10000", batch)
			}
			// A relay holds a few tickets at a time; keep the caches that
			// would otherwise fill with the backlog small: SQLite's page
			// cache, and the Go heap's headroom (unless GOGC is set).
			g.sqliteCacheKiB = relaySQLiteCacheKiB
			if os.Getenv("GOGC") == "" {
				defer debug.SetGCPercent(debug.SetGCPercent(relayGCPercent))
			}
			e, err := g.open(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			tr, err := g.openBrokerWaiting(cmd.Context(), e, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer tr.Close()
			var sent, failed, dead atomic.Int64
			err = e.pipe.Relay(cmd.Context(), pipeline.RelayOptions{Destination: g.destination, Transport: tr, Batch: batch, UntilEmpty: untilEmpty,
				OnSent: func(id int64, err error) {
					switch {
					case errors.Is(err, pipeline.ErrNotRelayable):
						dead.Add(1)
						fmt.Fprintf(cmd.ErrOrStderr(), "relay: job %d is dead (see claimcheck dead): %v\n", id, err)
					case err != nil:
						if failed.Add(1) == 1 {
							fmt.Fprintf(cmd.ErrOrStderr(), "relay: job %d not confirmed, kept in the outbox and retried: %v\n", id, err)
						}
					default:
						sent.Add(1)
					}
				}})
			if err != nil {
				return err
			}
			if g.json {
				if err := printJSON(cmd.OutOrStdout(), map[string]any{"destination": g.destination, "sent": sent.Load(), "failed_publishes": failed.Load(), "dead": dead.Load()}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "relayed destination %s: %d sent, %d publishes failed and retried, %d dead\n", g.destination, sent.Load(), failed.Load(), dead.Load())
			}
			if n := dead.Load(); n > 0 {
				return fmt.Errorf("%d outbox entries the broker refuses for good went to the dead letters; see: claimcheck dead", n)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&untilEmpty, "until-empty", false, "return once the outbox of the destination is empty")
	c.Flags().IntVar(&batch, "batch", 100, "entries in flight at once (memory depends on this, never on the backlog)")
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

// relayNow is submit's best effort: relay the destination's outbox over tr
// for up to 15 s. Entries not confirmed stay in the outbox, which is
// durable. tr is nil when the broker could not be reached (unreachable).
func relayNow(cmd *cobra.Command, g *globals, e *env, tr broker.Transport, unreachable error) {
	stderr := cmd.ErrOrStderr()
	if tr == nil {
		fmt.Fprintf(stderr, "kept in the outbox of destination %s (%v); claimcheck relay, work or run --broker sends it\n", g.destination, unreachable)
		return
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
	defer cancel()
	if err := e.pipe.Relay(ctx, pipeline.RelayOptions{Destination: g.destination, Transport: tr, UntilEmpty: true}); err != nil || ctx.Err() != nil {
		fmt.Fprintf(stderr, "not all of the outbox of destination %s was confirmed within 15 s; what is left stays there for claimcheck relay\n", g.destination)
		return
	}
	fmt.Fprintf(stderr, "relayed to the broker (destination %s)\n", g.destination)
}

// redactedBroker is --broker without its password, for messages.
func (g *globals) redactedBroker() string { return broker.RedactURL(g.brokerURL) }

// deleteTopology deletes the queues or streams a broker URL names, with
// their messages, where the transport can (scratch queues of bench relay
// and of tests).
func deleteTopology(ctx context.Context, brokerURL string) error {
	tr, err := broker.Open(ctx, brokerURL)
	if err != nil {
		return err
	}
	defer tr.Close()
	switch d := tr.(type) {
	case interface{ DeleteTopology() error }:
		return d.DeleteTopology()
	case interface{ DeleteTopology(context.Context) error }:
		return d.DeleteTopology(ctx)
	}
	return errors.New("the transport cannot delete its queues")
}

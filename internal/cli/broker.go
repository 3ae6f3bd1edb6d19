package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
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
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tr, err := broker.Open(octx, g.brokerURL)
	if err != nil {
		if errors.Is(err, claimcheck.ErrConfig) {
			return nil, usagef("--broker: %v", err)
		}
		return nil, fmt.Errorf("--broker: %w", err)
	}
	if err := broker.CheckConfig(e.store, tr, kinds...); err != nil {
		tr.Close()
		return nil, usagef("--broker: %v", err)
	}
	return tr, nil
}

// brokerTally counts what a broker consumer did.
type brokerTally struct {
	acked, retried, dead, duplicates, deleted atomic.Int64
	last                                      atomic.Int64 // unix nanos of the last settled delivery
}

// brokerWork relays destination's outbox to tr and consumes tr with
// handlers, recording outcomes in the job database's inbox, until ctx is
// done or stop returns true (polled every 200 ms). Failures are reported
// on stderr as they happen.
func brokerWork(ctx context.Context, g *globals, e *env, tr broker.Transport, handlers map[string]claimcheck.Handler, concurrency int, relay bool,
	stderr io.Writer, stop func(t *brokerTally) (bool, error), base broker.ConsumeOptions) (*brokerTally, error) {
	tally := &brokerTally{}
	tally.last.Store(time.Now().UnixNano())
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex // serialises stderr lines
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, format+"\n", args...)
	}
	var wg sync.WaitGroup
	errc := make(chan error, concurrency+1)
	if relay {
		var outage atomic.Bool
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- e.pipe.Relay(runCtx, pipeline.RelayOptions{Destination: g.destination, Transport: tr, OnSent: func(id int64, err error) {
				if err != nil && outage.CompareAndSwap(false, true) {
					say("relay: job %d not confirmed by the broker, kept in the outbox and retried: %v", id, err)
				}
				if err == nil && outage.CompareAndSwap(true, false) {
					say("relay: the broker confirms again")
				}
			}})
		}()
	}
	opts := base
	opts.Handlers, opts.MaxAttempts, opts.Inbox = handlers, g.maxAttempts, e.pipe.Inbox()
	opts.OnDone = func(_ *broker.Delivery, o broker.Outcome) {
		tally.last.Store(time.Now().UnixNano())
		switch {
		case o.Duplicate:
			tally.duplicates.Add(1)
		case o.Action == broker.Acked:
			tally.acked.Add(1)
		case o.Action == broker.Retried:
			tally.retried.Add(1)
		case o.Action == broker.DeadLettered:
			tally.dead.Add(1)
		}
		if o.Deleted {
			tally.deleted.Add(1)
		}
		if o.Err != nil {
			say("job %d (message %s): attempt %d %s (%s): %v", o.Job, o.ID, o.Attempt, o.Action, o.Reason, o.Err)
		}
	}
	opts.OnError = func(err error) { say("%v", err) }
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- broker.Consume(runCtx, tr, e.store, opts)
		}()
	}
	var err error
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case err = <-errc:
			if err != nil {
				break loop
			}
		case <-tick.C:
			if stop == nil {
				continue
			}
			done, serr := stop(tally)
			if serr != nil {
				err = serr
				break loop
			}
			if done {
				break loop
			}
		}
	}
	cancel()
	wg.Wait()
	close(errc)
	for e := range errc {
		if err == nil && e != nil {
			err = e
		}
	}
	return tally, err
}

// untilIdle is the stop rule of --until-empty over a broker: the outbox is
// empty and nothing was delivered for idle.
func untilIdle(ctx context.Context, e *env, dest string, idle time.Duration) func(t *brokerTally) (bool, error) {
	return func(t *brokerTally) (bool, error) {
		if time.Since(time.Unix(0, t.last.Load())) < idle {
			return false, nil
		}
		return e.pipe.OutboxEmpty(ctx, dest)
	}
}

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
			e, err := g.open(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			tr, err := g.openBroker(cmd.Context(), e)
			if err != nil {
				return err
			}
			defer tr.Close()
			var sent, failed atomic.Int64
			err = e.pipe.Relay(cmd.Context(), pipeline.RelayOptions{Destination: g.destination, Transport: tr, Batch: batch, UntilEmpty: untilEmpty,
				OnSent: func(id int64, err error) {
					if err != nil {
						if failed.Add(1) == 1 {
							fmt.Fprintf(cmd.ErrOrStderr(), "relay: job %d not confirmed, kept in the outbox and retried: %v\n", id, err)
						}
						return
					}
					sent.Add(1)
				}})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"destination": g.destination, "sent": sent.Load(), "failed_publishes": failed.Load()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "relayed destination %s: %d sent, %d publishes failed and retried\n", g.destination, sent.Load(), failed.Load())
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

// relayNow is submit's best effort: relay the destination's outbox for up
// to 15 s. Entries not confirmed stay in the outbox, which is durable.
func relayNow(cmd *cobra.Command, g *globals, e *env, kind string) {
	ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
	defer cancel()
	stderr := cmd.ErrOrStderr()
	tr, err := g.openBroker(ctx, e, kind)
	if err != nil {
		fmt.Fprintf(stderr, "kept in the outbox of destination %s (%v); claimcheck relay, work or run --broker sends it\n", g.destination, err)
		return
	}
	defer tr.Close()
	if err := e.pipe.Relay(ctx, pipeline.RelayOptions{Destination: g.destination, Transport: tr, UntilEmpty: true}); err != nil || ctx.Err() != nil {
		fmt.Fprintf(stderr, "not all of the outbox of destination %s was confirmed within 15 s; what is left stays there for claimcheck relay\n", g.destination)
		return
	}
	fmt.Fprintf(stderr, "relayed to the broker (destination %s)\n", g.destination)
}

// redactedBroker is --broker without its password, for messages.
func (g *globals) redactedBroker() string {
	if u, err := url.Parse(g.brokerURL); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

// The relay's memory settings: SQLite's page cache in KiB, and the Go
// garbage collector's GOGC (a live heap of a few MiB makes collections
// cheap).
const (
	relaySQLiteCacheKiB = 256
	relayGCPercent      = 25
)

// relayOptions are the options of relay.
type relayOptions struct {
	g          *globals
	untilEmpty bool
	batch      int
}

// Validate checks that --broker is given and --batch is 1 to 10000.
func (o *relayOptions) Validate() error {
	if o.g.brokerURL == "" {
		return usagef("relay needs --broker (or CLAIMCHECK_BROKER)")
	}
	if o.batch < 1 || o.batch > 10000 {
		return usagef("--batch %d: use 1 to 10000", o.batch)
	}
	return nil
}

func newRelay(g *globals) *cobra.Command {
	o := &relayOptions{g: g}
	c := &cobra.Command{
		Use:   "relay --broker URL [--destination D] [--until-empty]",
		Short: "Publish the outbox's tickets to the broker",
		Long: `Publish the tickets waiting in the outbox of --destination to --broker, each
counted as sent only once the broker confirms it. Payloads are never read.
While the broker is unreachable, entries stay in the outbox and are retried;
they go out when it returns. work --broker and run --broker relay too.`,
		Args: exactArgs(0, ""),
		RunE: runE(o, nil),
	}
	c.Flags().BoolVar(&o.untilEmpty, "until-empty", false, "return once the outbox of the destination is empty")
	c.Flags().IntVar(&o.batch, "batch", 100, "entries in flight at once (memory depends on this, never on the backlog)")
	return c
}

func (o *relayOptions) run(ctx context.Context, s streams) error {
	g := o.g
	// A relay holds a few tickets at a time; keep the caches that
	// would otherwise fill with the backlog small: SQLite's page
	// cache, and the Go heap's headroom (unless GOGC is set).
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(relayGCPercent))
	}
	e, err := g.open(ctx, openOptions{sqliteCacheKiB: relaySQLiteCacheKiB})
	if err != nil {
		return err
	}
	defer e.Close()
	tr, err := g.openBrokerWaiting(ctx, e, s.err)
	if err != nil {
		return err
	}
	defer tr.Close()
	var sent, failed, dead, requests atomic.Int64 // requests: Publish calls
	left := leftNotice(s.err)
	opts := g.relayOptions(tr)
	opts.Batch, opts.UntilEmpty = o.batch, o.untilEmpty
	opts.OnPublish = func(int, error) { requests.Add(1) }
	opts.OnSent = func(id int64, err error) {
		switch {
		case errors.Is(err, pipeline.ErrOtherBroker):
			left(id, err)
		case errors.Is(err, pipeline.ErrNotRelayable):
			dead.Add(1)
			fmt.Fprintf(s.err, "relay: job %d is dead (see claimcheck dead): %v\n", id, err)
		case err != nil:
			if failed.Add(1) == 1 {
				fmt.Fprintf(s.err, "relay: job %d not confirmed, kept in the outbox and retried: %v\n", id, err)
			}
		default:
			sent.Add(1)
		}
	}
	err = e.pipe.Relay(ctx, opts)
	if err != nil {
		return err
	}
	if g.json {
		if err := printJSON(s.out, map[string]any{"destination": g.destination, "sent": sent.Load(), "failed_publishes": failed.Load(), "dead": dead.Load(), "publish_calls": requests.Load()}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(s.out, "relayed destination %s: %d sent in %d publish calls, %d publishes failed and retried, %d dead\n", g.destination, sent.Load(), requests.Load(), failed.Load(), dead.Load())
	}
	if n := dead.Load(); n > 0 {
		return fmt.Errorf("%d outbox entries the broker refuses for good went to the dead letters; see: claimcheck dead", n)
	}
	return nil
}

package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/pipeline"
)

// submitted is what submit prints.
type submitted struct {
	ID          int64  `json:"id"`
	Duplicate   bool   `json:"duplicate"`
	Kind        string `json:"kind"`
	Tenant      string `json:"tenant"`
	Inline      bool   `json:"inline"`
	TicketBytes int    `json:"ticket_bytes"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256_prefix"`
	Priority    int    `json:"priority"`
}

func newSubmit(g *globals) *cobra.Command {
	var kind, tenant, idem, contentType, name, version string
	var allowEmpty, strict bool
	var priority int
	c := &cobra.Command{
		Use:   "submit --kind K --tenant T [--idempotency-key X] [--priority N] FILE|-",
		Short: "Check a payload in and enqueue one job carrying its ticket",
		Long: `Check a payload in (a file, or standard input with "-") and enqueue one job of
kind K for tenant T. The payload is stored before the job exists. With an
idempotency key, submitting again returns the first job and stores nothing new.

With --broker, the broker URL is checked first (a wrong one is refused with
nothing stored), the job goes into the outbox of --destination in the same
transaction as its registry row, and submit then relays the outbox to the
broker for up to 15 seconds; what the broker does not confirm by then, or
everything if it is unreachable, stays in the outbox for relay, work or run
--broker to send.

--priority 1 (highest, the default) to 4 (lowest): of the waiting jobs of a
kind, workers take the highest priority first. With --broker it needs a
broker queue with priorities (RabbitMQ with max_priority=4 in the URL); SQS
and NATS JetStream have no message priorities, so --priority is refused there
(and while the broker is unreachable) with nothing stored.`,
		Args: exactArgs(1, "FILE or -"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind == "" || tenant == "" {
				return usagef("submit needs --kind and --tenant")
			}
			if err := pipeline.ValidateKind(kind); err != nil {
				return usagef("%v", err)
			}
			if err := claimcheck.ValidateTenant(tenant); err != nil {
				return usagef("--tenant: %v", err)
			}
			if !cmd.Flags().Changed("priority") {
				priority = 0
			} else if priority == 0 {
				return usagef("--priority 0: use %d (highest) to %d (lowest)", pipeline.HighestPriority, pipeline.LowestPriority)
			} else if err := pipeline.ValidatePriority(priority); err != nil {
				return usagef("--priority: %v", err)
			}
			in, ct, closeIn, err := openInput(cmd, args[0])
			if err != nil {
				return err
			}
			defer closeIn()
			if contentType == "" {
				contentType = ct
			}
			e, err := g.open(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			if err := e.startupChecks(cmd.Context(), g, cmd.ErrOrStderr(), strict); err != nil {
				return err
			}
			if !allowEmpty {
				in = &nonEmpty{r: in, what: args[0]}
			}
			var dests []string
			var tr broker.Transport
			var unreachable error
			if g.brokerURL != "" {
				dests = []string{g.destination}
				// A broker URL that is wrong is refused before anything is
				// stored; one that is only unreachable leaves the job in the
				// outbox.
				if tr, unreachable = g.openBrokerWithin(cmd.Context(), e, 10*time.Second, kind); unreachable != nil {
					if errors.As(unreachable, new(usageError)) {
						return unreachable
					}
					if errors.Is(unreachable, claimcheck.ErrAccessDenied) {
						return fmt.Errorf("%w; nothing was stored", unreachable) // credentials to fix, not an outage
					}
				} else {
					defer tr.Close()
				}
				if err := submitPriority(tr, unreachable, priority); err != nil {
					return err
				}
			}
			res, err := e.pipe.Enqueue(cmd.Context(), kind, tenant, in, &pipeline.EnqueueOptions{
				IdempotencyKey: idem,
				CheckIn:        claimcheck.CheckInOptions{ContentType: contentType, Name: name, Version: version},
				Destinations:   dests,
				Broker:         g.brokerBinding(),
				Priority:       priority,
			})
			if err != nil {
				return err
			}
			if dests != nil {
				defer relayNow(cmd, g, e, tr, unreachable)
			}
			out := submitted{ID: res.JobID, Duplicate: res.Duplicate, Kind: kind, Tenant: tenant, Inline: res.Ticket.IsInline(),
				TicketBytes: res.TicketBytes, Size: res.Ticket.Size, SHA256: res.Ticket.DigestPrefix(), Priority: cmp.Or(priority, pipeline.DefaultPriority)}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			verb := "enqueued"
			if out.Duplicate {
				verb = "already enqueued (idempotency key matched)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %d %s: kind=%s tenant=%s priority=%d size=%d sha256=%s… %s ticket=%d bytes\n",
				out.ID, verb, kind, tenant, out.Priority, out.Size, out.SHA256, placement(out.Inline), out.TicketBytes)
			return nil
		},
	}
	c.Flags().StringVar(&kind, "kind", "", "job kind (required)")
	c.Flags().StringVar(&tenant, "tenant", "", "tenant owning the payload (required)")
	c.Flags().StringVar(&idem, "idempotency-key", "", "a second submit with the same kind, tenant and key returns the first job")
	c.Flags().StringVar(&contentType, "content-type", "", "payload media type (default: from the file extension)")
	c.Flags().StringVar(&name, "name", "", "store under this stable business key instead of the content address")
	c.Flags().StringVar(&version, "version", "", "version of a named payload that legitimately changes")
	c.Flags().BoolVar(&strict, "strict", false, "refuse to start (exit 2) when the bucket's lifecycle expires payloads/ or results/ sooner than claimcheck retention requires (default: a warning on standard error)")
	c.Flags().BoolVar(&allowEmpty, "allow-empty", false, "accept an empty (0-byte) payload")
	c.Flags().IntVar(&priority, "priority", pipeline.DefaultPriority, "job priority, 1 (highest) to 4 (lowest); with --broker only on a queue with priorities (RabbitMQ max_priority=4)")
	return c
}

// submitPriority refuses a priority (non-zero) on a broker that would not
// honour it, before anything is stored: tr without priorities, or no tr
// because the broker is unreachable and its queue cannot be checked.
func submitPriority(tr broker.Transport, unreachable error, priority int) error {
	if priority == 0 {
		return nil
	}
	if tr == nil {
		return fmt.Errorf("--priority: cannot check that the broker's queue has priorities while it is unreachable (%w); nothing was stored: submit again once it is reachable, or without --priority", unreachable)
	}
	if err := broker.CheckPriority(tr, priority); err != nil {
		return usagef("--priority %d with --broker: %v; nothing was stored", priority, err)
	}
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
	if err := e.pipe.Relay(ctx, pipeline.RelayOptions{Destination: g.destination, Broker: g.brokerBinding(), Transport: tr, UntilEmpty: true}); err != nil || ctx.Err() != nil {
		fmt.Fprintf(stderr, "not all of the outbox of destination %s was confirmed within 15 s; what is left stays there for claimcheck relay\n", g.destination)
		return
	}
	fmt.Fprintf(stderr, "relayed to the broker (destination %s)\n", g.destination)
}

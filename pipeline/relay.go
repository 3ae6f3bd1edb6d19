package pipeline

// The relay is pipeline/internal/outbox's; these are its public names, and
// Pipeline.Relay runs it on this pipeline's River client.

import (
	"context"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
	"github.com/claimcheck/claimcheck/pipeline/internal/outbox"
	"github.com/claimcheck/claimcheck/pipeline/internal/worker"
)

// relayPublishBatch is the most entries one Publish call carries
// (outbox.RelayPublishBatch).
const relayPublishBatch = outbox.RelayPublishBatch

// Relay publishes the tickets of one destination's outbox entries to a
// broker, oldest first, until ctx is done (or, with UntilEmpty, until the
// outbox is empty). Entries in flight are published in batches of up to ten
// per Publish call (one SQS SendMessageBatch, ten pipelined confirms),
// each entry still confirmed, retried or dead-lettered on its own. It reads tickets only, never payloads, and holds at
// most Batch entries at once, so its memory does not depend on the
// backlog's length or on the payloads' sizes.
//
// An entry counts as sent, and its job completes, only once the broker has
// confirmed it (broker.Transport.Publish). A failed publish leaves the
// entry in the outbox, retried after a pause (see MaxRetryDelay) as long as
// it takes: an outage delays entries and loses none. A publish whose
// confirmation was lost may reach the broker twice; every publish of an
// entry carries the same broker.AttrIdempotencyKey (MessageID), which a
// consumer's broker.Inbox uses to process it once per queue, and every
// publish of one attempt the same broker.AttrID (PublishID), which
// JetStream's duplicate window uses to store it once; a replay has an
// AttrID of its own, so that window never drops it. A message the
// transport refuses for good (claimcheck.Refused: too large for it,
// broker.ErrMessageTooLarge, or ErrConfig) dead-letters its entry with the
// reason ReasonNotRelayable.
//
// Each message carries the ticket as its body and the attributes
// broker.AttrKind, AttrTenant, AttrID, AttrIdempotencyKey, AttrJob (the
// entry's job id) and
// AttrMaxAttempts (the entry's, so the consumer applies the producer's
// limit); with RelayOptions.Format.AWS, an AWS payload pointer to a
// per-message copy of the payload instead of the ticket, with the same
// attributes plus the pointer's (broker.Pointer.Message).
//
// Errors: ErrConfig for a missing transport, an invalid destination, or
// Format.AWS with a store that seals its payloads (broker.Format.CheckStore);
// River's start and stop errors, wrapped.
func (p *Pipeline) Relay(ctx context.Context, opts RelayOptions) error {
	return outbox.Relay(ctx, &outbox.Host{
		Client: p.client, Store: p.store, Tel: p.tel,
		Run: func(ctx context.Context, w river.Worker[jobArgs], destination string, maxWorkers int, untilEmpty bool, filter func(*river.JobListParams) *river.JobListParams) error {
			queue := outboxQueue(destination)
			workers, err := worker.RiverWorkers[jobs.Args](w, jobs.ArgsOf, riverKind("", destination))
			if err != nil {
				return fmt.Errorf("pipeline: relay: %w", err)
			}
			return p.work.RunClient(ctx, workers, map[string]river.QueueConfig{queue: {MaxWorkers: maxWorkers}}, []string{queue}, untilEmpty, worker.Drain{Filter: filter})
		},
		DeadLetter: worker.DeadLetter, DeadLetterAs: worker.DeadLetterAs, LeaveDelay: worker.LeaveDelay,
		InTx: p.inTx,
	}, opts)
}

// pipeline/internal/outbox/outbox.go:

// MaxDestinationLen is the longest destination name, in bytes: River's
// longest queue name (64 characters, river.Client's queue validation)
// less the 18 bytes of OutboxQueuePrefix.
const MaxDestinationLen = outbox.MaxDestinationLen

// ValidateDestination checks an outbox destination name: 2 to
// MaxDestinationLen characters a-z, 0-9, single '-' or '_' between them
// (the rule of kinds).
func ValidateDestination(dest string) error { return outbox.ValidateDestination(dest) }

// RelayOptions configure Relay.
type RelayOptions = outbox.RelayOptions

// ErrOtherBroker marks, in RelayOptions.OnSent, an entry bound to another
// broker than the relay's (EnqueueOptions.Broker, RelayOptions.Broker):
// nothing was published, and the entry stays in the outbox, no attempt
// spent, for a relay of its own broker.
var ErrOtherBroker = outbox.ErrOtherBroker

// ErrNotRelayable marks, in RelayOptions.OnSent, an entry the transport
// refuses for good (too large for it, or a configuration error): the entry
// is dead with reason ReasonNotRelayable, and Replay sends it again once
// fixed.
var ErrNotRelayable = outbox.ErrNotRelayable

// ReasonNotRelayable is the reason of an outbox entry dead because its
// transport refuses it for good (ErrNotRelayable).
const ReasonNotRelayable = outbox.ReasonNotRelayable

// MessageID is the broker.AttrIdempotencyKey of an outbox entry: the same
// for every publish of the entry, replays included, different for every
// entry (it digests the job id with the encoded ticket, whose creation time
// and digest differ even where a SQLite job id is reused after a rollback).
// 32 lowercase hex characters after "cc-".
func MessageID(jobID int64, ticket []byte) string { return outbox.MessageID(jobID, ticket) }

// PublishID is the broker.AttrID of the relay's publish of the entry whose
// MessageID is key, on the entry's River attempt attempt: key itself on
// the first attempt, key + "-" + attempt after it. Every retry of one
// attempt after a failed publish is a snooze, which River does not count,
// so it sends the same id again and the broker's duplicate detection
// (JetStream's duplicate window, SQS FIFO deduplication) stores it once. A
// replay (Replay) is a new attempt and so gets an id of its own: a broker
// that remembers the first publish cannot drop it. Consumers recognise the
// entry across replays by the idempotency key.
func PublishID(key string, attempt int) string { return outbox.PublishID(key, attempt) }

package jobs

// What a claimcheck job is in River's job table: its arguments and output,
// its River kind and queue, and which rows are claimcheck's.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck"
)

// River's job kind (river_job.kind, the kind River UI and River's metrics
// show) is the claimcheck kind of a job, the same as its arguments' "kind"
// and its queue's (StoreQueue); an outbox entry's is its queue's name,
// OutboxQueuePrefix+destination, since its relay publishes entries of
// every kind to that destination. LegacyRiverKind was every job's and
// entry's River kind before (docs/invariants.md, "River kinds"): workers
// and relays still take jobs of that kind, so jobs enqueued before work
// as they were. Nothing inserts it any more.
const LegacyRiverKind = "claimcheck"

// RiverKind is the River job kind of a job of claimcheck kind kind, or of
// an outbox entry for dest (dest not empty).
func RiverKind(kind, dest string) string {
	if dest != "" {
		return OutboxQueue(dest)
	}
	return kind
}

// OwnJobsSQL is the condition on river_job that selects claimcheck's jobs
// and outbox entries, and no River job of another program sharing the
// database: a River kind equal to the arguments' kind (a job), to its
// outbox queue (an entry, whose name no kind may take: ValidateKind), or
// LegacyRiverKind. OwnJob is the same rule in Go.
const OwnJobsSQL = `(kind = args ->> 'kind' OR (kind = queue AND queue LIKE '` + OutboxQueuePrefix + `%') OR kind = '` + LegacyRiverKind + `')`

// OwnJob reports whether row, whose arguments are args, is claimcheck's
// job or outbox entry (OwnJobsSQL).
func OwnJob(row *rivertype.JobRow, args *Args) bool {
	return row.Kind == args.JobKind || row.Kind == row.Queue && strings.HasPrefix(row.Queue, OutboxQueuePrefix) || row.Kind == LegacyRiverKind
}

var kindRegexp = regexp.MustCompile(`^[a-z0-9]+(?:[_-]?[a-z0-9]+)*$`)

// ValidateKind checks a job kind: 2 to 64 lowercase letters and digits,
// single '-' or '_' between them (River's queue-name rule, plus its 2-byte
// minimum for kinds), not starting with "claimcheck-outbox-" (the outbox's
// queues) or "claimcheck-store-" (named stores' queues, StoreQueue).
func ValidateKind(kind string) error {
	if strings.HasPrefix(kind, OutboxQueuePrefix) {
		return fmt.Errorf("kind %q is invalid: names starting with %q are reserved for the outbox", TruncateName(kind), OutboxQueuePrefix)
	}
	if strings.HasPrefix(kind, StoreQueuePrefix) {
		return fmt.Errorf("kind %q is invalid: names starting with %q are reserved for the queues of named stores", TruncateName(kind), StoreQueuePrefix)
	}
	if len(kind) < 2 || len(kind) > 64 || !kindRegexp.MatchString(kind) {
		shown := kind
		if len(shown) > 64 {
			shown = shown[:64] + "…"
		}
		return fmt.Errorf("kind %q (%d bytes) is invalid: use 2 to 64 characters a-z, 0-9, single '-' or '_' between them", shown, len(kind))
	}
	return nil
}

// Args are the River arguments of every claimcheck job: the ticket and
// what routing needs, nothing else.
type Args struct {
	JobKind        string          `json:"kind"`
	Tenant         string          `json:"tenant" river:"unique"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" river:"unique"`
	Ticket         json.RawMessage `json:"ticket"`
	// Destination is set on an outbox entry: the broker destination its
	// relay publishes to.
	Destination string `json:"destination,omitempty"`
}

// Kind is the job's River kind as the arguments say it (RiverKind): a
// job of LegacyRiverKind says another.
func (a Args) Kind() string { return RiverKind(a.JobKind, a.Destination) }

// ArgsOf are the arguments of kind, for registering a worker under it.
func ArgsOf(kind string) Args { return Args{JobKind: kind} }

// WorkArgsOf is ArgsOf for the job worker.
func WorkArgsOf(kind string) WorkArgs { return WorkArgs{JobKind: kind} }

// WorkArgs are Args as the job worker decodes them (River's UnmarshalJob,
// encoding/json): the ticket's fields are decoded in the arguments' own
// pass, where Args' json.RawMessage cost a second scan and a copy of an
// inline payload's base64 and ParseTicket a third pass (a 4 KiB inline
// job's arguments decoded and parsed in 28 µs against 35, and half the
// bytes allocated: BenchmarkDecodeArgs). Ticket.Check validates the
// ticket as ParseTicket does.
// Arguments whose ticket does not decode (a ticket of the wrong JSON
// shape) fail River's decode; the worker then decodes them as Args and
// keeps the ticket's bytes in Raw, whose ParseTicket error is the job's.
type WorkArgs struct {
	JobKind        string                   `json:"kind"`
	Tenant         string                   `json:"tenant"`
	IdempotencyKey string                   `json:"idempotency_key,omitempty"`
	Ticket         claimcheck.DecodedTicket `json:"ticket"`
	Destination    string                   `json:"destination,omitempty"`
	// Raw is set only for arguments whose ticket did not decode (nil for
	// none, which Ticket.Check refuses as ParseTicket refuses null).
	Raw json.RawMessage `json:"-"`
}

// Kind is the job's River kind (RiverKind).
func (a WorkArgs) Kind() string { return RiverKind(a.JobKind, a.Destination) }

// ParseTicket is the job's ticket, validated (claimcheck.ParseTicket's
// errors).
func (a *WorkArgs) ParseTicket() (*claimcheck.Ticket, error) {
	if a.Raw != nil {
		return claimcheck.ParseTicket(a.Raw)
	}
	return a.Ticket.Check()
}

// InsertArgs are Args as an insert writes them, the same JSON: the
// ticket is marshaled as the struct it is, where a json.RawMessage of it
// would be compacted by encoding/json, one more scan of every byte of an
// inline payload's base64 (a tenth of a small job's enqueue CPU).
type InsertArgs struct {
	JobKind        string             `json:"kind"`
	Tenant         string             `json:"tenant" river:"unique"`
	IdempotencyKey string             `json:"idempotency_key,omitempty" river:"unique"`
	Ticket         *claimcheck.Ticket `json:"ticket"`
	Destination    string             `json:"destination,omitempty"`
}

// Kind is the job's River kind (RiverKind).
func (a InsertArgs) Kind() string { return RiverKind(a.JobKind, a.Destination) }

// CompactJSON returns b without insignificant whitespace. PostgreSQL keeps
// job arguments as jsonb, which reads back reformatted ("a": 1, "b": 2);
// compacting restores the size the producer encoded, so ticket and argument
// sizes read the same on every database. b is returned as is if it is not
// valid JSON (ParseTicket then reports it).
func CompactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// Output is what a completed job records as its River output.
type Output struct {
	Result json.RawMessage `json:"result,omitempty"`
	// UnavailableSince is when the job's current run of attempts that met
	// unavailable infrastructure began (RetryPolicy.Window).
	UnavailableSince time.Time `json:"unavailable_since,omitzero"`
	// WaitReason and WaitError are the cause of the latest unavailable
	// attempt (claimcheck.Reason and the error's text), shown by List and
	// Get as the waiting job's Reason and Error.
	WaitReason string `json:"wait_reason,omitempty"`
	WaitError  string `json:"wait_error,omitempty"`
}

// ErrJobNotFound is returned (wrapped) for a job id that does not exist.
var ErrJobNotFound = errors.New("job not found")

// OutboxQueuePrefix starts the River queue of every outbox destination.
// ValidateKind refuses kinds that start with it, so no job of the pipeline
// shares a queue with an outbox.
const OutboxQueuePrefix = "claimcheck-outbox-"

func TruncateName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func OutboxQueue(dest string) string { return OutboxQueuePrefix + dest }

// IsOutboxQueue reports whether a River queue is an outbox's, and its
// destination.
func IsOutboxQueue(queue string) (string, bool) {
	return strings.CutPrefix(queue, OutboxQueuePrefix)
}

// StoreQueuePrefix starts the River queue of a job in a store other than
// claimcheck.DefaultStoreName: StoreQueuePrefix + store + "_" + kind.
const StoreQueuePrefix = "claimcheck-store-"

// QueueStore is the store of a job in River queue q (StoreQueue's
// inverse): claimcheck.DefaultStoreName for a queue named after its kind
// alone.
func QueueStore(q string) string {
	rest, ok := strings.CutPrefix(q, StoreQueuePrefix)
	if !ok {
		return claimcheck.DefaultStoreName
	}
	store, _, _ := strings.Cut(rest, "_")
	return store
}

// QueueKind is the kind whose jobs wait in queue q (StoreQueue), which is
// also their River kind (RiverKind); q itself for a queue not named by
// StoreQueue.
func QueueKind(q string) string {
	if rest, ok := strings.CutPrefix(q, StoreQueuePrefix); ok { // STORE_KIND
		_, kind, _ := strings.Cut(rest, "_")
		return kind
	}
	return q
}

// Unmarshal decodes a job's arguments (or output) b into v; errors name
// what was being decoded.
func Unmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("pipeline: decode job arguments: %w", err)
	}
	return nil
}

// EntryMetadata is what an outbox entry records in its River metadata:
// the broker it is bound to (EnqueueOptions.Broker), "" for none.
type EntryMetadata struct {
	Broker string `json:"broker,omitempty"`
}

// EntryBroker is the broker an outbox entry is bound to, from its River
// metadata; "" when unbound.
func EntryBroker(metadata []byte) string {
	var m EntryMetadata
	_ = json.Unmarshal(metadata, &m)
	return m.Broker
}

// Job priorities, River's: 1 is worked first, 4 last.
const (
	HighestPriority = 1
	LowestPriority  = 4
	// DefaultPriority is a job's priority when EnqueueOptions.Priority is
	// 0: River's default, the highest.
	DefaultPriority = HighestPriority
)

// PendingStates are the states in which a job still has work ahead of it.
var PendingStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}

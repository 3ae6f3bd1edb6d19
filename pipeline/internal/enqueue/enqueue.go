// Package enqueue is package pipeline's insert of jobs: a job, or one
// outbox entry per destination, with the claims-registry rows of its
// documents (their check-in intents anchored) in one transaction
// (docs/invariants.md, invariant 1); the idempotency key's duplicates and
// conflicts, jobs of the legacy River kind included; and the outbox
// destinations' broker bindings. Package pipeline validates the enqueue,
// checks its documents in and picks the job's queue and store, and keeps
// the public names (EnqueueOptions, EnqueueResult, the errors).
package enqueue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline/internal/checkin"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
)

// ErrIdempotencyConflict: pipeline.ErrIdempotencyConflict (documented
// there).
var ErrIdempotencyConflict = errors.New("idempotency key already used for other bytes")

// ErrDestinationBound: pipeline.ErrDestinationBound (documented there).
var ErrDestinationBound = errors.New("outbox destination bound to another broker")

// Host is what the insert needs of its pipeline.
type Host struct {
	// DB is the job database; Client the pipeline's insert-only River
	// client on it.
	DB     *sql.DB
	Client *river.Client[*sql.Tx]
	// Intents anchors the documents' check-in intents and records their
	// keys (checkin.Intents).
	Intents *checkin.Intents
	// Store is the default store; StoreFor the store holding a ticket's
	// object (pipeline's storeFor).
	Store    *claimcheck.Store
	StoreFor func(t *claimcheck.Ticket) (*claimcheck.Store, error)
}

// Options are an enqueue's pipeline.EnqueueOptions the insert uses (the
// same names, documented there).
type Options struct {
	IdempotencyKey string
	MaxAttempts    int
	Priority       int
	Destinations   []string
	Broker         string
}

// Result is pipeline.EnqueueResult (the same fields, documented there).
type Result struct {
	JobID       int64
	JobIDs      []int64
	Ticket      *claimcheck.Ticket
	TicketBytes int
	Duplicate   bool
}

func prefix12(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// Native is pipeline's enqueueChecked on PostgreSQL for a job whose
// transaction holds River's insert and nothing else (an inline ticket: no
// registry row, no check-in intent, no outbox entry): River's Insert, in a
// transaction of its own on the pgx pool (jobdb.PostgresDriver). Through River's
// database/sql driver the same insert took about twice the CPU (its lib/pq
// array parameters, database/sql's layers), the main cost of a small job's
// enqueue.
func (h *Host) Native(ctx context.Context, kind, queue string, t *claimcheck.Ticket, enc []byte, opts *Options) (*Result, error) {
	args, insert, err := h.jobInsert(ctx, nil, kind, queue, t, opts, "")
	if err != nil {
		return nil, err
	}
	ins, err := h.legacyDuplicate(ctx, nil, insert.Queue, t.Tenant, opts.IdempotencyKey)
	if err == nil && ins == nil {
		ins, err = h.Client.Insert(ctx, args, insert)
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: insert job for %s: %w", t, err)
	}
	return h.inserted(ctx, ins, kind, t, nil, enc, opts)
}

// Tx is pipeline.EnqueueTx of t (encoded as enc) as kind in queue, its
// documents in st, with t's manifest m when the caller has it (nil: read
// it from st if t is a manifest's).
func (h *Host) Tx(ctx context.Context, tx *sql.Tx, kind, queue string, st *claimcheck.Store, t *claimcheck.Ticket, m *claimcheck.Manifest, enc []byte, opts *Options) (*Result, error) {
	if t.Manifest && m == nil {
		var err error
		if m, err = st.ReadManifest(ctx, t); err != nil {
			return nil, fmt.Errorf("pipeline: enqueue %s: %w", t, err)
		}
	}
	anchored := []*claimcheck.Ticket{t}
	if m != nil {
		anchored = append(anchored, m.Tickets()...)
		// One key order for every transaction that locks several keys,
		// so that two enqueues sharing documents cannot deadlock.
		slices.SortFunc(anchored, func(a, b *claimcheck.Ticket) int { return strings.Compare(a.Key, b.Key) })
	}
	for _, a := range anchored {
		if err := h.Intents.Anchor(ctx, tx, a, "enqueue"); err != nil {
			return nil, err
		}
	}
	// A ticket sealed outside this pipeline's check-ins records its key
	// with the job (docs/invariants.md, keys).
	if err := h.Intents.RecordTicketKey(ctx, tx, st, t); err != nil {
		return nil, err
	}
	if len(opts.Destinations) == 0 {
		return h.insert(ctx, tx, kind, queue, t, m, enc, opts, "")
	}
	var first *Result
	for _, dest := range opts.Destinations {
		res, err := h.insert(ctx, tx, kind, queue, t, m, enc, opts, dest)
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = res
		}
		first.JobIDs = append(first.JobIDs, res.JobID)
	}
	return first, nil
}

// insert writes one job (dest empty) in queue, or outbox entry, and its
// registry row.
func (h *Host) insert(ctx context.Context, tx *sql.Tx, kind, queue string, t *claimcheck.Ticket, m *claimcheck.Manifest, enc []byte, opts *Options, dest string) (*Result, error) {
	args, insert, err := h.jobInsert(ctx, tx, kind, queue, t, opts, dest)
	if err != nil {
		return nil, err
	}
	ins, err := h.legacyDuplicate(ctx, tx, insert.Queue, t.Tenant, opts.IdempotencyKey)
	if err == nil && ins == nil {
		ins, err = h.Client.InsertTx(ctx, tx, args, insert)
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: insert job for %s: %w", t, err)
	}
	res, err := h.inserted(ctx, ins, kind, t, m, enc, opts)
	if err != nil || res.Duplicate {
		return res, err
	}
	if err := jobdb.Register(ctx, tx, ins.Job.ID, jobdb.RolePayload, t); err != nil {
		return nil, err
	}
	if m != nil {
		// A manifest's documents are referenced as long as the job is:
		// no sweep deletes them (docs/invariants.md, invariant 6).
		for _, d := range m.Tickets() {
			if err := jobdb.Register(ctx, tx, ins.Job.ID, jobdb.RoleAttachment, d); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// jobInsert is River's arguments and insert options for one job (dest
// empty) in queue, or outbox entry for dest, whose broker binding it
// checks with q (not used for a job, or an entry without
// EnqueueOptions.Broker).
func (h *Host) jobInsert(ctx context.Context, q queryer, kind, queue string, t *claimcheck.Ticket, opts *Options, dest string) (jobs.InsertArgs, *river.InsertOpts, error) {
	// The job's arguments carry t as t.Marshal() encodes it (jobs.InsertArgs
	// marshals t alike).
	args := jobs.InsertArgs{JobKind: kind, Tenant: t.Tenant, IdempotencyKey: opts.IdempotencyKey, Ticket: t, Destination: dest}
	insert := &river.InsertOpts{Queue: queue, MaxAttempts: opts.MaxAttempts, Priority: opts.Priority}
	if dest != "" {
		insert.Queue = jobs.OutboxQueue(dest)
		if opts.Broker != "" {
			if err := h.CheckBinding(ctx, q, dest, opts.Broker); err != nil {
				return args, nil, err
			}
			md, err := json.Marshal(jobs.EntryMetadata{Broker: opts.Broker})
			if err != nil {
				return args, nil, err
			}
			insert.Metadata = md
		}
	}
	if opts.IdempotencyKey != "" {
		insert.UniqueOpts = river.UniqueOpts{ByArgs: true, ByQueue: true}
	}
	return args, insert, nil
}

// legacyDuplicate finds the job of jobs.LegacyRiverKind in queue that holds
// tenant's idempotency key, as River's unique insert would have found it
// when every job had that River kind: the key held by a job not dead
// (River's default unique states). It returns River's insert result for
// that job, a duplicate, or nil when there is none or key is empty.
// River's own unique key, which hashes the River kind, does not match it
// (docs/invariants.md, "River kinds"). One probe of River's kind index
// while no job of the legacy kind is left. tx nil: outside a transaction.
func (h *Host) legacyDuplicate(ctx context.Context, tx *sql.Tx, queue, tenant, key string) (*rivertype.JobInsertResult, error) {
	if key == "" {
		return nil, nil
	}
	var q queryer = h.DB
	if tx != nil {
		q = tx
	}
	var id int64
	err := q.QueryRowContext(ctx, `SELECT id FROM river_job WHERE kind = $1 AND queue = $2 AND unique_key IS NOT NULL
		AND state NOT IN ('cancelled', 'discarded') AND args ->> 'tenant' = $3 AND args ->> 'idempotency_key' = $4 ORDER BY id LIMIT 1`,
		jobs.LegacyRiverKind, queue, tenant, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up idempotency key %q among jobs of River kind %s: %w", jobs.TruncateName(key), jobs.LegacyRiverKind, err)
	}
	var row *rivertype.JobRow
	if tx != nil {
		row, err = h.Client.JobGetTx(ctx, tx, id)
	} else {
		row, err = h.Client.JobGet(ctx, id)
	}
	if err != nil {
		return nil, fmt.Errorf("read job %d, which holds idempotency key %q: %w", id, jobs.TruncateName(key), err)
	}
	return &rivertype.JobInsertResult{Job: row, UniqueSkippedAsDuplicate: true}, nil
}

// inserted is the result of River's insert ins of a job carrying t (with
// manifest m, encoded as enc): the job, or the first job holding its
// idempotency key, if it carries the same documents (else
// ErrIdempotencyConflict).
func (h *Host) inserted(ctx context.Context, ins *rivertype.JobInsertResult, kind string, t *claimcheck.Ticket, m *claimcheck.Manifest, enc []byte, opts *Options) (*Result, error) {
	res := &Result{JobID: ins.Job.ID, Ticket: t, TicketBytes: len(enc), Duplicate: ins.UniqueSkippedAsDuplicate}
	if !res.Duplicate {
		return res, nil
	}
	var first jobs.Args
	if err := jobs.Unmarshal(ins.Job.EncodedArgs, &first); err != nil {
		return nil, err
	}
	first.Ticket = jobs.CompactJSON(first.Ticket)
	var err error
	if res.Ticket, err = claimcheck.ParseTicket(first.Ticket); err != nil {
		return nil, err
	}
	same, err := h.sameDocuments(ctx, res.Ticket, t, m)
	if err != nil {
		return nil, fmt.Errorf("pipeline: compare with job %d, which holds idempotency key %q: %w", res.JobID, jobs.TruncateName(opts.IdempotencyKey), err)
	}
	if !same {
		return nil, fmt.Errorf("pipeline: idempotency-conflict: idempotency key %q (kind %s, tenant %s) belongs to job %d, whose payload is sha256 %s… (%d bytes); this payload is sha256 %s… (%d bytes): not enqueued: %w",
			jobs.TruncateName(opts.IdempotencyKey), kind, t.Tenant, res.JobID, prefix12(res.Ticket.SHA256), res.Ticket.Size, prefix12(t.SHA256), t.Size, ErrIdempotencyConflict)
	}
	res.TicketBytes = len(first.Ticket)
	return res, nil
}

// sameDocuments reports whether first, the ticket of the job holding an
// idempotency key, carries the same documents as t (with manifest m, nil
// when t is not a manifest's): the same payload digest and size, or, for
// manifests (which record check-in times, so never repeat their own
// digest), the same main payload and the same attachments by name,
// digest and size, in order. Errors: reading first's manifest.
func (h *Host) sameDocuments(ctx context.Context, first, t *claimcheck.Ticket, m *claimcheck.Manifest) (bool, error) {
	if first.Manifest != t.Manifest {
		return false, nil
	}
	if !t.Manifest {
		return first.SHA256 == t.SHA256 && first.Size == t.Size, nil
	}
	if first.SHA256 == t.SHA256 {
		return true, nil
	}
	fst, err := h.StoreFor(first)
	if err != nil {
		return false, err
	}
	fm, err := fst.ReadManifest(ctx, first)
	if err != nil {
		return false, err
	}
	if m == nil {
		// The store of a ticket this pipeline checked in or anchored; an
		// unknown one falls back to the default store, whose read refuses
		// the ticket for naming another store.
		mst, serr := h.StoreFor(t)
		if serr != nil {
			mst = h.Store
		}
		if m, err = mst.ReadManifest(ctx, t); err != nil {
			return false, err
		}
	}
	same := func(a, b *claimcheck.Ticket) bool {
		return a == nil && b == nil || a != nil && b != nil && a.SHA256 == b.SHA256 && a.Size == b.Size
	}
	if !same(fm.Payload, m.Payload) || len(fm.Attachments) != len(m.Attachments) {
		return false, nil
	}
	for i, a := range m.Attachments {
		if fm.Attachments[i].Name != a.Name || !same(fm.Attachments[i].Ticket, a.Ticket) {
			return false, nil
		}
	}
	return true, nil
}

// queryer is a *sql.DB or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// CheckBinding refuses, with ErrDestinationBound, an entry for dest bound
// to broker when a pending entry of dest is bound to another broker.
// Unbound entries (EnqueueOptions.Broker empty) bind nothing.
func (h *Host) CheckBinding(ctx context.Context, q queryer, dest, broker string) error {
	if broker == "" {
		return nil
	}
	var id int64
	var other string
	err := q.QueryRowContext(ctx, `SELECT id, metadata ->> 'broker' FROM river_job
		WHERE queue = $1 AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
		AND metadata ->> 'broker' IS NOT NULL AND metadata ->> 'broker' <> '' AND metadata ->> 'broker' <> $2
		ORDER BY id LIMIT 1`, jobs.OutboxQueue(dest), broker).Scan(&id, &other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("pipeline: look up the broker of destination %s: %w", dest, err)
	}
	return fmt.Errorf("pipeline: destination %q is bound to broker %s (its pending entry %d, and any others, go there), not %s: nothing was stored; give this broker a destination of its own (--destination), or relay the pending entries first: %w: %w",
		dest, other, id, broker, ErrDestinationBound, claimcheck.ErrConfig)
}

package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
	"github.com/claimcheck/claimcheck/pipeline/internal/worker"
)

// legacyArgs are a job's arguments as claimcheck inserted them before
// River kinds were claimcheck kinds: insertArgs' fields and tags (its
// JSON, its unique fields), under River kind legacyRiverKind.
type legacyArgs insertArgs

func (legacyArgs) Kind() string { return legacyRiverKind }

// enqueueLegacy enqueues payload as the code before River kinds did: the
// check-in, then the job of River kind legacyRiverKind (in kind's queue,
// or for an outbox entry in dest's) and its registry row in one
// transaction, River's unique insert by queue and arguments when key is
// set.
func (b *testBundle) enqueueLegacy(t *testing.T, kind, tenant, payload, key, dest string) int64 {
	t.Helper()
	tk, err := b.p.CheckIn(b.ctx, tenant, strings.NewReader(payload), nil)
	if err != nil {
		t.Fatalf("CheckIn: %v", err)
	}
	tx, err := b.p.db.BeginTx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := b.p.ci.Anchor(b.ctx, tx, tk, "enqueue"); err != nil {
		t.Fatal(err)
	}
	opts := &river.InsertOpts{Queue: kind}
	if dest != "" {
		opts.Queue = outboxQueue(dest)
	}
	if key != "" {
		opts.UniqueOpts = river.UniqueOpts{ByArgs: true, ByQueue: true}
	}
	ins, err := b.p.client.InsertTx(b.ctx, tx, legacyArgs{JobKind: kind, Tenant: tenant, IdempotencyKey: key, Ticket: tk, Destination: dest}, opts)
	if err != nil {
		t.Fatalf("insert a job of the legacy shape: %v", err)
	}
	if err := jobdb.Register(b.ctx, tx, ins.Job.ID, jobdb.RolePayload, tk); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ins.Job.ID
}

// riverKindOf is job id's River kind, as river_job records it.
func (b *testBundle) riverKindOf(t *testing.T, id int64) string {
	t.Helper()
	row, err := b.p.client.JobGet(b.ctx, id)
	if err != nil {
		t.Fatalf("JobGet(%d): %v", id, err)
	}
	return row.Kind
}

// foreignArgs are a River job of another program sharing the database.
type foreignArgs struct {
	N int `json:"n"`
}

func (foreignArgs) Kind() string { return "other_program" }

// TestRiverKinds: new jobs carry their claimcheck kind as River kind, and
// outbox entries their queue's name; jobs and entries enqueued with the
// legacy River kind are listed, hold their idempotency key, and are worked
// and relayed as before; another program's River job stays out of sight.
func TestRiverKinds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), nil)
		big := strings.Repeat("offloaded ", 8<<10) // over the inline threshold
		oldOffloaded := b.enqueueLegacy(t, "invoice", "acme", big, "", "")
		oldKeyed := b.enqueueLegacy(t, "invoice", "acme", "inline and keyed", "inv-1", "")
		oldEntry := b.enqueueLegacy(t, "invoice", "acme", "an old entry", "", "billing")
		oldDead := b.enqueueLegacy(t, "invoice", "acme", "an old dead letter", "", "")
		for _, id := range []int64{oldOffloaded, oldKeyed, oldEntry, oldDead} {
			if k := b.riverKindOf(t, id); k != legacyRiverKind {
				t.Fatalf("legacy job %d has River kind %q", id, k)
			}
		}

		res, err := b.p.Enqueue(b.ctx, "invoice", "acme", strings.NewReader("a new one"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if k := b.riverKindOf(t, res.JobID); k != "invoice" {
			t.Errorf("new job's River kind %q, want invoice", k)
		}
		entry, err := b.p.Enqueue(b.ctx, "invoice", "acme", strings.NewReader("a new entry"), &EnqueueOptions{Destinations: []string{"billing"}})
		if err != nil {
			t.Fatal(err)
		}
		if k := b.riverKindOf(t, entry.JobID); k != "claimcheck-outbox-billing" {
			t.Errorf("new outbox entry's River kind %q, want claimcheck-outbox-billing", k)
		}
		// New-shape idempotency still deduplicates through River's unique insert.
		keyed, err := b.p.Enqueue(b.ctx, "invoice", "acme", strings.NewReader("new keyed"), &EnqueueOptions{IdempotencyKey: "inv-2"})
		if err != nil {
			t.Fatal(err)
		}
		if again, err := b.p.Enqueue(b.ctx, "invoice", "acme", strings.NewReader("new keyed"), &EnqueueOptions{IdempotencyKey: "inv-2"}); err != nil || !again.Duplicate || again.JobID != keyed.JobID {
			t.Errorf("new keyed job enqueued again: %+v, %v; want a duplicate of %d", again, err, keyed.JobID)
		}

		// The legacy job's idempotency key holds: the same bytes are its
		// duplicate, other bytes a conflict, on both insert paths.
		dup, err := b.p.Enqueue(b.ctx, "invoice", "acme", strings.NewReader("inline and keyed"), &EnqueueOptions{IdempotencyKey: "inv-1"})
		if err != nil || !dup.Duplicate || dup.JobID != oldKeyed {
			t.Errorf("enqueue with the legacy job's key: %+v, %v; want a duplicate of %d", dup, err, oldKeyed)
		}
		if _, err := b.p.Enqueue(b.ctx, "invoice", "acme", strings.NewReader(big), &EnqueueOptions{IdempotencyKey: "inv-1"}); !errors.Is(err, ErrIdempotencyConflict) {
			t.Errorf("other bytes under the legacy job's key: %v, want ErrIdempotencyConflict", err)
		}
		if other, err := b.p.Enqueue(b.ctx, "invoice", "globex", strings.NewReader("inline and keyed"), &EnqueueOptions{IdempotencyKey: "inv-1"}); err != nil || other.Duplicate {
			t.Errorf("another tenant's job with the same key: %+v, %v; want a job of its own", other, err)
		}

		foreign, err := b.p.client.Insert(b.ctx, foreignArgs{N: 1}, &river.InsertOpts{Queue: "invoice-reports"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.p.Get(b.ctx, foreign.Job.ID); !errors.Is(err, ErrJobNotFound) {
			t.Errorf("Get(another program's job): %v, want ErrJobNotFound", err)
		}
		if _, err := b.p.ReleaseJob(b.ctx, foreign.Job.ID, &ReleaseOptions{Force: true}); !errors.Is(err, ErrJobNotFound) {
			t.Errorf("ReleaseJob(another program's job): %v, want ErrJobNotFound", err)
		}
		// A legacy dead letter is replayed as any.
		if _, err := b.p.Cancel(b.ctx, oldDead); err != nil {
			t.Fatal(err)
		}
		if ids := b.deadIDs(t); len(ids) != 1 || ids[0] != oldDead {
			t.Errorf("dead letters %v, want the legacy job %d", ids, oldDead)
		}
		if j, err := b.p.Replay(b.ctx, oldDead); err != nil || j.State != string(rivertype.JobStateAvailable) {
			t.Errorf("Replay(legacy job %d): %+v, %v", oldDead, j, err)
		}
		listed := map[int64]string{}
		if err := b.p.List(b.ctx, ListOptions{}, func(j *JobInfo) error {
			listed[j.ID] = j.Kind
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []int64{oldOffloaded, oldKeyed, oldEntry, oldDead, res.JobID, entry.JobID, keyed.JobID} {
			if listed[id] != "invoice" {
				t.Errorf("job %d listed as %q, want invoice (listed: %v)", id, listed[id], listed)
			}
		}
		if _, ok := listed[foreign.Job.ID]; ok {
			t.Errorf("another program's job %d listed", foreign.Job.ID)
		}
		stats, err := b.p.OutboxStats(b.ctx)
		if err != nil || len(stats) != 1 || stats[0].Depth != 2 {
			t.Errorf("OutboxStats: %+v, %v; want billing with 2 entries (one legacy)", stats, err)
		}

		// No worker ran: River has no queue rows for River UI to list,
		// until RegisterQueues adds them.
		if _, err := b.p.RiverClient().QueueGet(b.ctx, "invoice"); !errors.Is(err, river.ErrNotFound) {
			t.Errorf("queue invoice before any worker: %v, want River's ErrNotFound", err)
		}
		if n, err := b.p.RegisterQueues(b.ctx); err != nil || n != 3 { // invoice, invoice-reports, the outbox's
			t.Errorf("RegisterQueues: %d, %v; want 3 queues", n, err)
		}
		for _, q := range []string{"invoice", outboxQueue("billing")} {
			if _, err := b.p.RiverClient().QueueGet(b.ctx, q); err != nil {
				t.Errorf("queue %s after RegisterQueues: %v", q, err)
			}
		}

		rec := &recorder{}
		b.work(t, map[string]claimcheck.Handler{"invoice": rec})
		if n := rec.count(); n != 6 { // the 3 legacy jobs; the plain new one, inv-2's, globex's inv-1
			t.Errorf("handler ran %d times, want 6", n)
		}
		for _, id := range []int64{oldOffloaded, oldKeyed, oldDead, res.JobID, keyed.JobID} {
			if j := b.get(t, id); j.State != string(rivertype.JobStateCompleted) {
				t.Errorf("job %d (River kind %s): %s %s %s, want completed", id, b.riverKindOf(t, id), j.State, j.Reason, j.Error)
			}
		}
		tr := brokertest.NewFake(64 << 10)
		b.relay(t, "billing", tr, nil)
		got := drain(t, tr)
		if len(got) != 2 {
			t.Errorf("relay published %d entries, want 2 (one legacy)", len(got))
		}
		for _, id := range []int64{oldEntry, entry.JobID} {
			if j := b.get(t, id); j.State != StateSent {
				t.Errorf("outbox entry %d (River kind %s): %s, want %s", id, b.riverKindOf(t, id), j.State, StateSent)
			}
		}
	})
}

// TestWorkerKindsRegistered: Work registers one worker per kind plus the
// legacy kind, a kind named like the legacy one included, and River
// refuses nothing.
func TestWorkerKindsRegistered(t *testing.T) {
	for _, kinds := range [][]string{{"invoice"}, {"invoice", "report"}, {legacyRiverKind, "invoice"}} {
		if _, err := worker.RiverWorkers[jobs.WorkArgs](&worker.Worker{}, jobs.WorkArgsOf, kinds...); err != nil {
			t.Errorf("RiverWorkers(%v): %v", kinds, err)
		}
	}
}

// TestJobStatesAreWorkers: each JobState is the string of the worker's
// state (pipeline/internal/worker) that Work's outcomes convert from.
func TestJobStatesAreWorkers(t *testing.T) {
	for want, got := range map[JobState]worker.State{JobCompleted: worker.Completed, JobRetrying: worker.Retrying, JobWaiting: worker.Waiting,
		JobDead: worker.Dead, JobReleased: worker.Released, JobLeft: worker.Left} {
		if JobState(got) != want {
			t.Errorf("worker state %q, want %q", got, want)
		}
	}
}

package pipeline

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/pipeline/internal/inbox"
)

// A job attempted before whose outcome record (docs/invariants.md,
// invariant 12) is in the store is completed from it, with the recorded
// result, and its handler does not run again; the record is deleted.
func TestOutcomeRecordSettlesRetriedJob(t *testing.T) {
	b := setup(t, dbtest.SQLite(t), &testOpts{store: claimcheck.Options{AlwaysOffload: true}})
	res, err := b.p.Enqueue(b.ctx, "once", "acme", strings.NewReader("a payload"), nil)
	if err != nil {
		t.Fatal(err)
	}
	row, err := b.p.client.JobGet(b.ctx, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	key := inbox.OutcomeKey(strconv.FormatInt(res.JobID, 10), row.CreatedAt)
	var runs atomic.Int32
	h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		runs.Add(1)
		// As if this attempt's handler had finished and its completion
		// failed: its result checked in and its outcome recorded; the
		// attempt then fails (its lease lost).
		rt, err := b.p.CheckIn(ctx, "acme", strings.NewReader("the recorded result"), &claimcheck.CheckInOptions{Result: true})
		if err != nil {
			return nil, err
		}
		enc, _ := rt.Marshal()
		if err := inbox.WriteOutcome(ctx, b.store, key, &inbox.OutcomeRecord{Job: job.ID, Kind: job.Kind, Attempt: job.Attempt, Result: enc}); err != nil {
			return nil, err
		}
		return nil, errors.New("lease lost after the handler finished")
	})
	var settled atomic.Int32
	ctx, cancel := context.WithTimeout(b.ctx, workTimeout)
	defer cancel()
	if err := b.p.Work(ctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"once": h}, UntilEmpty: true, OnDone: func(o Outcome) {
		if o.FromOutcome {
			settled.Add(1)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	j := b.get(t, res.JobID)
	if j.State != "completed" || runs.Load() != 1 || settled.Load() != 1 || j.Attempts != 2 {
		t.Fatalf("job %s after %d attempts, handler runs %d, settled from the record %d; want completed, 2, 1, 1", j.State, j.Attempts, runs.Load(), settled.Load())
	}
	r, _, err := b.p.OpenResult(b.ctx, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "the recorded result" {
		t.Fatalf("result %q, want the recorded one", got)
	}
	if ok, err := b.store.Bucket().Exists(b.ctx, key); err != nil || ok {
		t.Fatalf("outcome record still there (%v, %v) after its job was settled", ok, err)
	}
}

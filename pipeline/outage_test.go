package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/internal/outageproxy"
)

// A 30 s PostgreSQL outage (a proxy cut) that begins as a handler
// finishes: its 100 KiB result is checked in, and its registry row and the
// job's completion are retried on their own until the database is back.
// The handler runs exactly once.
func TestDatabaseOutageKeepsFinishedWork(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s outage")
	}
	u, err := url.Parse(dbtest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := outageproxy.New(t, u.Host)
	u.Host = proxy.Addr()
	b := setup(t, u.String(), nil)
	id := enqueueOne(t, b, "big-result")
	result := bytes.Repeat([]byte("r"), 100<<10)
	var calls atomic.Int32
	h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		calls.Add(1)
		proxy.Cut() // the outage begins as the handler finishes
		time.AfterFunc(30*time.Second, proxy.Restore)
		return &claimcheck.Result{Body: bytes.NewReader(result)}, nil
	})
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Minute)
	defer cancel()
	start := time.Now()
	if err := b.p.Work(ctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"big-result": h}, UntilEmpty: true}); err != nil {
		t.Fatalf("Work: %v", err)
	}
	t.Logf("completed %s after the handler started, through a 30 s outage", time.Since(start).Round(time.Second))
	j := b.get(t, id)
	if j.State != "completed" || j.Attempts != 1 || !j.HasResult || calls.Load() != 1 {
		t.Fatalf("after the outage: state %s, attempts %d, result %v, handler runs %d; want completed, 1, true, 1", j.State, j.Attempts, j.HasResult, calls.Load())
	}
	r, _, err := b.p.OpenResult(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, result) {
		t.Fatalf("result: %d bytes, %v; want the 100 KiB the handler returned", len(got), err)
	}
	if n := countRows(t, b, `SELECT COUNT(*) FROM claimcheck_claim WHERE job_id = $1 AND role = 'result'`, id); n != 1 {
		t.Errorf("result registry rows = %d, want 1", n)
	}
}

// TestOpenResultGone: a completed job whose result object is gone (a
// mem:// store that did not outlive its process, a lifecycle rule, a
// hand) is ErrPayloadMissing from OpenResult, and the message says it is
// the job's result, not its payload, that is missing.
func TestOpenResultGone(t *testing.T) {
	b := setup(t, dbtest.SQLite(t), &testOpts{store: claimcheck.Options{AlwaysOffload: true}})
	res, err := b.p.Enqueue(b.ctx, "echo", "acme", strings.NewReader("a payload"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b.work(t, map[string]claimcheck.Handler{"echo": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
		return &claimcheck.Result{Body: strings.NewReader("a result")}, nil
	})})
	j, err := b.p.Get(b.ctx, res.JobID)
	if err != nil || j.ResultTicket() == nil {
		t.Fatalf("job %d: %v, result %v", res.JobID, err, j)
	}
	if err := b.store.Bucket().Delete(b.ctx, j.ResultTicket().Key); err != nil {
		t.Fatal(err)
	}
	_, _, err = b.p.OpenResult(b.ctx, res.JobID)
	if !errors.Is(err, claimcheck.ErrPayloadMissing) || !strings.Contains(err.Error(), fmt.Sprintf("job %d: its result", res.JobID)) {
		t.Fatalf("OpenResult of a job whose result is gone: %v; want ErrPayloadMissing naming the job's result", err)
	}
	t.Log(err)
}

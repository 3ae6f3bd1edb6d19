package pipeline

import (
	"bytes"
	"context"
	"io"
	"net/url"
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

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline/internal/worker"
	"github.com/riverqueue/river/rivertype"
)

// TestWaitingJobsWokenWhenOutageEnds: two jobs wait 30 s for an
// unavailable store (their waits are RetryPolicy.MaxWaitDelay), and a
// third waits in place finishing its work (untilDone). One is brought
// forward by hand and succeeds: the other, still waiting, is made
// available at once (wakeWaiting) and completes within seconds, and the
// wait in place ends at once (backSignal), not at the end of their 30 s
// waits.
func TestWaitingJobsWokenWhenOutageEnds(t *testing.T) {
	forEachBackend(t, testWaitingJobsWoken)
}

func testWaitingJobsWoken(t *testing.T, newDB func(testing.TB) string) {
	b := setup(t, newDB(t), &testOpts{cfg: Config{Retry: claimcheck.RetryPolicy{Base: 30 * time.Second, MaxWaitDelay: 30 * time.Second}}})
	var ids []int64
	for i := range 2 {
		res, err := b.p.Enqueue(b.ctx, "docs", "acme", strings.NewReader(fmt.Sprint("document ", i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	var down atomic.Bool
	down.Store(true)
	var mu sync.Mutex
	waiting := map[int64]bool{}
	completed := map[int64]time.Time{}
	h := claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
		if down.Load() {
			return nil, fmt.Errorf("read the store: %w", errors.Join(errors.New("connection refused"), claimcheck.ErrUnavailable))
		}
		return nil, nil
	})
	ctx, cancel := context.WithTimeout(b.ctx, workTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- b.p.Work(ctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"docs": h}, Concurrency: 2, OnDone: func(o Outcome) {
			mu.Lock()
			defer mu.Unlock()
			switch o.State {
			case JobWaiting:
				waiting[o.JobID] = true
			case JobCompleted:
				completed[o.JobID] = time.Now()
				if len(completed) == len(ids) {
					cancel()
				}
			}
		}})
	}()
	for {
		mu.Lock()
		n := len(waiting)
		mu.Unlock()
		if n == len(ids) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the jobs never waited: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The store is back; one job's wait is cut short by hand, as if its
	// timer had fired first.
	// River records a snooze after the worker returns (its completer).
	for _, id := range ids {
		for {
			row, err := b.p.client.JobGet(b.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if row.State == rivertype.JobStateScheduled {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("job %d: state %s, never scheduled to wait", id, row.State)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	// A job of the process waits in place, finishing its work (untilDone,
	// a 30 s pause too).
	w := worker.New(b.p.work, nil, nil, nil)
	failed, inPlace := make(chan struct{}, 1), make(chan time.Time, 1)
	go func() {
		_ = w.UntilDone(ctx, 99, "check in the result", func() error {
			if down.Load() {
				select {
				case failed <- struct{}{}:
				default:
				}
				return fmt.Errorf("check in: %w", claimcheck.ErrUnavailable)
			}
			return nil
		})
		inPlace <- time.Now()
	}()
	<-failed
	down.Store(false)
	start := time.Now()
	if _, err := b.p.client.JobRetry(b.ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	<-errc
	mu.Lock()
	defer mu.Unlock()
	if len(completed) != len(ids) {
		t.Fatalf("completed %v of jobs %v within %v; the other job sat out its 30 s wait", completed, ids, workTimeout)
	}
	other := completed[ids[1]].Sub(start)
	if other > 10*time.Second {
		t.Fatalf("the other waiting job completed %v after the first, want within seconds", other)
	}
	select {
	case done := <-inPlace:
		if d := done.Sub(start); d > 10*time.Second {
			t.Fatalf("the wait in place ended %v after the first job completed, want within seconds", d)
		}
		t.Logf("the wait in place ended %v after the store came back", done.Sub(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the wait in place did not end within 5 s of the first job's completion (its pause is 30 s)")
	}
	t.Logf("first job completed after %v, the other woken and completed after %v (its wait was 30 s)", completed[ids[0]].Sub(start).Round(time.Millisecond), other.Round(time.Millisecond))
}

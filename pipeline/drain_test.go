package pipeline

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline/internal/worker"
)

// blockingHandler signals when it starts, then runs until release is
// closed or its context is done.
type blockingHandler struct {
	started chan struct{}
	release chan struct{}
	calls   atomic.Int32
	once    sync.Once
	ctxErr  atomic.Value
}

func newBlocking() *blockingHandler {
	return &blockingHandler{started: make(chan struct{}), release: make(chan struct{})}
}

func (h *blockingHandler) Handle(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
	h.calls.Add(1)
	h.once.Do(func() { close(h.started) })
	select {
	case <-h.release:
		return &claimcheck.Result{Body: strings.NewReader("done")}, nil
	case <-ctx.Done():
		h.ctxErr.Store(context.Cause(ctx))
		return nil, ctx.Err()
	}
}

func enqueueOne(t *testing.T, b *testBundle, kind string) int64 {
	t.Helper()
	res, err := b.p.Enqueue(b.ctx, kind, "acme", strings.NewReader("payload"), nil)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return res.JobID
}

// startWork runs Work in the background and returns a function waiting
// for its result.
func startWork(ctx context.Context, b *testBundle, opts WorkOptions) func() error {
	errc := make(chan error, 1)
	go func() { errc <- b.p.Work(ctx, opts) }()
	return func() error {
		select {
		case err := <-errc:
			return err
		case <-time.After(workTimeout):
			return errors.New("Work did not return")
		}
	}
}

// Stopping a worker (SIGTERM, interrupt) while a handler runs lets the
// handler finish: the job completes on its first attempt.
func TestDrainLetsRunningHandlerFinish(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), nil)
		id := enqueueOne(t, b, "slow")
		h := newBlocking()
		var notes []string
		var mu sync.Mutex
		ctx, cancel := context.WithCancel(b.ctx)
		wait := startWork(ctx, b, WorkOptions{Handlers: map[string]claimcheck.Handler{"slow": h}, DrainTimeout: 20 * time.Second,
			Notify: func(s string) { mu.Lock(); notes = append(notes, s); mu.Unlock() }})
		<-h.started
		cancel()
		time.AfterFunc(500*time.Millisecond, func() { close(h.release) })
		if err := wait(); err != nil {
			t.Fatalf("Work: %v", err)
		}
		j := b.get(t, id)
		if j.State != "completed" || j.Attempts != 1 || !j.HasResult {
			t.Errorf("job after drain: state %s, attempts %d, result %v; want completed, 1, true", j.State, j.Attempts, j.HasResult)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(notes) == 0 || !strings.Contains(notes[0], "waiting up to 20s for job") {
			t.Errorf("drain said %q; want what it waits for", notes)
		}
	})
}

// A handler still running at the drain deadline is cancelled and its job
// goes back to the queue without spending an attempt; the next worker
// completes it on attempt 1. Abort does the same at once.
func TestDrainDeadlineReleasesJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		for _, abort := range []bool{false, true} {
			b := setup(t, newDB(t), nil)
			id := enqueueOne(t, b, "slow")
			h := newBlocking()
			ctx, cancel := context.WithCancel(b.ctx)
			ab := make(chan struct{})
			opts := WorkOptions{Handlers: map[string]claimcheck.Handler{"slow": h}, DrainTimeout: 300 * time.Millisecond, Abort: ab}
			var released Outcome
			opts.OnDone = func(o Outcome) { released = o }
			if abort {
				opts.DrainTimeout = time.Hour
			}
			wait := startWork(ctx, b, opts)
			<-h.started
			cancel()
			if abort {
				close(ab)
			}
			if err := wait(); err != nil {
				t.Fatalf("Work: %v", err)
			}
			if released.State != JobReleased {
				t.Errorf("abort=%v: outcome %+v, want released", abort, released)
			}
			if c, _ := h.ctxErr.Load().(error); !errors.Is(c, worker.ErrReleased) {
				t.Errorf("abort=%v: handler's context cause %v, want errReleased", abort, c)
			}
			j := b.get(t, id)
			if j.State != "available" || j.Attempts != 0 {
				t.Fatalf("abort=%v: released job: state %s, attempts %d; want available, 0", abort, j.State, j.Attempts)
			}
			close(h.release)
			b.work(t, map[string]claimcheck.Handler{"slow": h})
			if j := b.get(t, id); j.State != "completed" || j.Attempts != 1 {
				t.Errorf("abort=%v: next worker: state %s, attempts %d; want completed, 1", abort, j.State, j.Attempts)
			}
		}
	})
}

// A job left running by a worker that died (its lease not renewed) is
// rescued and worked; ReleaseJob returns such a job at once, and refuses
// one whose lease is fresh.
func TestCrashedWorkerRescueAndRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), &testOpts{cfg: Config{Lease: 2 * time.Second}})
		id := enqueueOne(t, b, "echo")
		// What a killed worker leaves: running, attempt 1, lease last
		// renewed 10 s ago.
		setRunning(t, b, id, 10*time.Second)
		start := time.Now()
		b.work(t, map[string]claimcheck.Handler{"echo": &recorder{}})
		j := b.get(t, id)
		if j.State != "completed" || j.Attempts != 2 {
			t.Errorf("rescued job: state %s, attempts %d; want completed, 2", j.State, j.Attempts)
		}
		t.Logf("rescued and completed in %s", time.Since(start).Round(time.Millisecond))

		id = enqueueOne(t, b, "echo")
		setRunning(t, b, id, 0)
		if _, err := b.p.ReleaseJob(b.ctx, id, nil); !errors.Is(err, ErrJobHeld) {
			t.Fatalf("ReleaseJob of a fresh lease: %v, want ErrJobHeld", err)
		}
		if j, err := b.p.ReleaseJob(b.ctx, id, &ReleaseOptions{Force: true}); err != nil || j.State != "available" {
			t.Fatalf("ReleaseJob --force of a fresh lease: %+v, %v; want available", j, err)
		}
		setRunning(t, b, id, 0)
		setRunning(t, b, id, 10*time.Second)
		j2, err := b.p.ReleaseJob(b.ctx, id, nil)
		if err != nil || j2.State != "available" || j2.Attempts != 0 {
			t.Fatalf("ReleaseJob of an expired lease: %+v, %v; want available, attempts 0", j2, err)
		}
		if _, err := b.p.ReleaseJob(b.ctx, id, nil); !errors.Is(err, ErrNotRunning) {
			t.Errorf("ReleaseJob of an available job: %v, want ErrNotRunning", err)
		}
		if _, err := b.p.ReleaseJob(b.ctx, 99999, nil); !errors.Is(err, ErrJobNotFound) {
			t.Errorf("ReleaseJob of no job: %v, want ErrJobNotFound", err)
		}
	})
}

// setRunning makes job id look taken by a worker whose lease was last
// renewed ago.
func setRunning(t *testing.T, b *testBundle, id int64, ago time.Duration) {
	t.Helper()
	q := `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = datetime('now', 'subsec', '-' || $2 || ' seconds') WHERE id = $1`
	if b.p.dialect != "sqlite" {
		q = `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - make_interval(secs => $2::float8) WHERE id = $1`
	}
	if _, err := b.p.db.ExecContext(b.ctx, q, id, ago.Seconds()); err != nil {
		t.Fatalf("set job %d running: %v", id, err)
	}
}

// A handler that runs far longer than the lease on a live worker is never
// rescued: its lease is renewed. River's rescuer runs every 30 s, so the
// handler outlives one of its runs with a 1 s lease.
func TestLiveWorkerKeepsLongJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 35 s (River's rescuer interval)")
	}
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), &testOpts{cfg: Config{Lease: time.Second}})
		id := enqueueOne(t, b, "long")
		h := newBlocking()
		time.AfterFunc(worker.RescuerInterval+5*time.Second, func() { close(h.release) })
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
		defer cancel()
		if err := b.p.Work(ctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"long": h}, UntilEmpty: true}); err != nil {
			t.Fatalf("Work: %v", err)
		}
		j := b.get(t, id)
		if j.State != "completed" || j.Attempts != 1 || h.calls.Load() != 1 {
			t.Errorf("long job: state %s, attempts %d, handler calls %d; want completed, 1, 1", j.State, j.Attempts, h.calls.Load())
		}
	})
}

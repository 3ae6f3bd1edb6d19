package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/pipeline/pipelinetest"
)

// Several producers and workers share one database, as separate processes
// would: each has its own Open (its own connection pool) and its own store
// handle on the same bucket. Every job must be worked exactly once, on its
// first attempt, and the claims registry must agree with the jobs.
//
// The same with real processes (two workers, one producer) on PostgreSQL:
//
//	createdb -h 127.0.0.1 -U postgres claimcheck_demo
//	export CLAIMCHECK_DATABASE='postgres://postgres@127.0.0.1:5432/claimcheck_demo?sslmode=disable'
//	export CLAIMCHECK_STORE=file:///tmp/cc-demo/objects
//	export CLAIMCHECK_SECRET=$(openssl rand -hex 32)
//	export CLAIMCHECK_KEEPER="base64key://$(openssl rand -base64 32 | tr '+/' '-_')"
//	go build -o /tmp/cc-demo/claimcheck ./cmd/claimcheck   # or: go run ./cmd/claimcheck …
//	/tmp/cc-demo/claimcheck migrate
//	/tmp/cc-demo/claimcheck --data /tmp/cc-demo/w1 work --kind checksum --concurrency 4 --exec -- sha256sum &
//	/tmp/cc-demo/claimcheck --data /tmp/cc-demo/w2 work --kind checksum --concurrency 4 --exec -- sha256sum &
//	for f in /tmp/cc-demo/in/*; do /tmp/cc-demo/claimcheck --data /tmp/cc-demo/p submit --kind checksum --tenant acme "$f"; done
//	psql -h 127.0.0.1 -U postgres -d claimcheck_demo -c 'SELECT state, attempt, count(*) FROM river_job GROUP BY 1, 2'
//
// (The workers share the store, secret and keeper, as separate hosts would;
// stop them with SIGINT once nothing is pending.)
func TestSharedDatabase(t *testing.T) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		testSharedDatabase(t, pipelinetest.SQLiteDatabase(t), 150)
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		testSharedDatabase(t, pipelinetest.PostgresDatabase(t), 300)
	})
}

func testSharedDatabase(t *testing.T, database string, jobs int) {
	ctx := t.Context()
	bucket := "file://" + filepath.Join(t.TempDir(), "bucket")

	// open is one "process": a store handle and a pipeline of its own.
	open := func(name string) *pipeline.Pipeline {
		t.Helper()
		store, err := claimcheck.OpenStore(ctx, bucket, &claimcheck.Options{SpoolDir: filepath.Join(t.TempDir(), name)})
		if err != nil {
			t.Fatalf("%s: OpenStore: %v", name, err)
		}
		t.Cleanup(func() { store.Close() })
		p, err := pipeline.Open(ctx, pipeline.Config{Database: database, Store: store})
		if err != nil {
			t.Fatalf("%s: Open: %v", name, err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	// Open all three at once: they migrate the fresh database together.
	var producer *pipeline.Pipeline
	workers := make([]*pipeline.Pipeline, 2)
	var wg sync.WaitGroup
	wg.Go(func() { producer = open("producer") })
	for i := range workers {
		wg.Go(func() { workers[i] = open(fmt.Sprintf("worker%d", i)) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Handler: count invocations per job id and per worker; return a result
	// for every other job.
	var mu sync.Mutex
	calls := make(map[int64]int)
	perWorker := make([]atomic.Int64, len(workers))
	handler := func(w int) claimcheck.Handler {
		return claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			id, err := strconv.ParseInt(job.ID, 10, 64)
			if err != nil {
				return nil, claimcheck.Permanent(err)
			}
			mu.Lock()
			calls[id]++
			mu.Unlock()
			perWorker[w].Add(1)
			rc, err := job.Payload.Open(ctx)
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			n, err := io.Copy(io.Discard, rc)
			if err != nil {
				return nil, err
			}
			if id%2 == 0 {
				return &claimcheck.Result{Body: bytes.NewReader(fmt.Appendf(nil, "job %d: %d bytes", id, n))}, nil
			}
			return nil, nil
		})
	}

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	workErrs := make(chan error, len(workers))
	for i, w := range workers {
		go func() {
			workErrs <- w.Work(workCtx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{"shared": handler(i)}, Concurrency: 4})
		}()
	}

	// Producer, concurrently: a third of the payloads offloaded (above the
	// inline threshold), the rest inline.
	type enqueued struct {
		offloaded bool
		key       string
	}
	want := make(map[int64]enqueued, jobs)
	start := time.Now()
	for i := range jobs {
		data := fmt.Appendf(nil, "payload %d", i)
		if i%3 == 0 {
			data = append(data, bytes.Repeat([]byte{byte(i)}, int(claimcheck.DefaultInlineThreshold)+1)...)
		}
		res, err := producer.Enqueue(ctx, "shared", "acme", bytes.NewReader(data), nil)
		if err != nil {
			t.Fatalf("Enqueue %d: %v", i, err)
		}
		if _, dup := want[res.JobID]; dup || res.Duplicate {
			t.Fatalf("Enqueue %d returned job %d again", i, res.JobID)
		}
		want[res.JobID] = enqueued{offloaded: !res.Ticket.IsInline(), key: res.Ticket.Key}
	}
	enqueueTime := time.Since(start)

	// Wait for every job to settle, then stop the workers.
	deadline := time.Now().Add(90 * time.Second)
	for {
		pending := 0
		err := producer.List(ctx, pipeline.ListOptions{Kind: "shared", State: "completed", PageSize: 500}, func(*pipeline.JobInfo) error {
			pending++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if pending == jobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs completed after 90s", pending, jobs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopWork()
	for range workers {
		if err := <-workErrs; err != nil {
			t.Errorf("Work: %v", err)
		}
	}
	t.Logf("%d jobs enqueued in %v; worked by worker 0: %d, worker 1: %d; total %v",
		jobs, enqueueTime.Round(time.Millisecond), perWorker[0].Load(), perWorker[1].Load(), time.Since(start).Round(time.Millisecond))

	// Exactly once, attempt 1, nothing left or dead.
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != jobs {
		t.Errorf("handler saw %d distinct jobs, want %d", len(calls), jobs)
	}
	for id, n := range calls {
		if _, ok := want[id]; !ok {
			t.Errorf("handler saw job %d, never enqueued", id)
		}
		if n != 1 {
			t.Errorf("job %d handled %d times, want 1", id, n)
		}
	}
	offloaded := 0
	seen := 0
	err := producer.List(ctx, pipeline.ListOptions{}, func(j *pipeline.JobInfo) error {
		seen++
		e, ok := want[j.ID]
		if !ok {
			return fmt.Errorf("job %d listed, never enqueued", j.ID)
		}
		if j.State != "completed" || j.Attempts != 1 || j.Dead {
			return fmt.Errorf("job %d: state %s, attempts %d, dead %v; want completed on attempt 1", j.ID, j.State, j.Attempts, j.Dead)
		}
		if j.HasResult != (j.ID%2 == 0) {
			return fmt.Errorf("job %d: has result %v", j.ID, j.HasResult)
		}
		if e.offloaded {
			offloaded++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != jobs {
		t.Fatalf("%d jobs listed, want %d", seen, jobs)
	}
	if perWorker[0].Load() == 0 || perWorker[1].Load() == 0 {
		t.Errorf("one worker did all the work (%d, %d)", perWorker[0].Load(), perWorker[1].Load())
	}

	// The registry agrees: one payload row per offloaded job, on its key;
	// none for inline payloads; results are small, so inline, and unregistered.
	rows, err := pipelinetest.Claims(ctx, producer, 0)
	if err != nil {
		t.Fatal(err)
	}
	payloadRows := 0
	for _, r := range rows {
		e, ok := want[r.JobID]
		switch {
		case !ok:
			t.Errorf("registry row for unknown job %d", r.JobID)
		case r.Role != "payload":
			t.Errorf("registry row %+v, want payload rows only", r)
		case !e.offloaded || r.Key != e.key:
			t.Errorf("registry row %+v does not match job %d (offloaded %v, key %q)", r, r.JobID, e.offloaded, e.key)
		default:
			payloadRows++
		}
	}
	if payloadRows != offloaded || offloaded != (jobs+2)/3 {
		t.Errorf("%d payload registry rows for %d offloaded jobs, want %d", payloadRows, offloaded, (jobs+2)/3)
	}
}

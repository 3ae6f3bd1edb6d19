package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// chaosEnv gates the fault trials: they kill databases and take minutes.
const chaosEnv = "CLAIMCHECK_TEST_CHAOS"

func requireChaos(t *testing.T) {
	t.Helper()
	if os.Getenv(chaosEnv) == "" {
		t.Skip(chaosEnv + " is not set: the fault trials (minutes each) run only when asked (scripts/chaos.sh)")
	}
}

// chaosCounter counts each job's handler runs, as the handler itself sees
// them: the one effect claimcheck cannot take back.
type chaosCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *chaosCounter) run(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[id]++
}

func (c *chaosCounter) dups() (dups int, ran int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.runs {
		if n > 0 {
			ran++
		}
		if n > 1 {
			dups += n - 1
		}
	}
	return dups, ran
}

// check fails t for each job whose handler ran more than once, and
// returns the duplicate runs.
func (c *chaosCounter) check(t *testing.T) int {
	dups, _ := c.dups()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.runs {
		if n > 1 {
			t.Errorf("job %s: its handler ran %d times", id, n)
		}
	}
	return dups
}

// killPostgres kills pg with -9 kills times, each after it has run 5-10 s,
// and starts it again after 20-30 s (longer than the tests' leases and
// hold windows), logging how many of jobs' handlers have run. It returns
// when pg was last started.
func killPostgres(t *testing.T, pg *testenv.PrivatePG, counter *chaosCounter, kills, jobs int) time.Time {
	var restarted time.Time
	for i := range kills {
		time.Sleep(time.Duration(5+rand.IntN(5)) * time.Second)
		down := time.Duration(20+rand.IntN(10)) * time.Second
		_, ran := counter.dups()
		t.Logf("kill %d: kill -9 PostgreSQL for %s (%d of %d jobs' handlers have run)", i+1, down, ran, jobs)
		pg.Kill()
		time.Sleep(down)
		pg.Start()
		restarted = time.Now()
	}
	return restarted
}

// TestChaosPostgresKilled: a private PostgreSQL killed with -9 five times,
// each time down 20-30 s (longer than the test's 4 s lease), while 100
// jobs with results over 64 KiB flow. No job is lost, none dead, and no
// handler runs twice (docs/invariants.md, invariant 12): a handler that
// finished while the database was gone has its outcome recorded in the
// store, and the rescued job is completed from it.
func TestChaosPostgresKilled(t *testing.T) {
	requireChaos(t)
	pg := testenv.StartPrivatePG(t)
	const (
		jobs  = 100
		lease = 4 * time.Second
		kills = 5
	)
	b := setup(t, pg.URL(), &testOpts{cfg: Config{Lease: lease, Retry: claimcheck.RetryPolicy{Base: 100 * time.Millisecond}, MaxConns: 20}})
	ids := make([]int64, 0, jobs)
	for i := range jobs {
		res, err := b.p.Enqueue(b.ctx, "chaos", "acme", bytes.NewReader([]byte("payload "+strconv.Itoa(i))), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	counter := &chaosCounter{runs: map[string]int{}}
	h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		counter.run(job.ID)
		time.Sleep(time.Duration(1000+rand.IntN(2000)) * time.Millisecond)
		body := bytes.Repeat([]byte(job.ID+" "), (65<<10)/(len(job.ID)+1)+1) // > 64 KiB
		return &claimcheck.Result{Body: bytes.NewReader(body)}, nil
	})
	ctx, cancel := context.WithTimeout(b.ctx, 12*time.Minute)
	defer cancel()
	var fromRecord atomic.Int32 // jobs completed from an outcome record
	errc := make(chan error, 1)
	go func() {
		errc <- b.p.Work(ctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"chaos": h}, Concurrency: 4, UntilEmpty: true, DrainTimeout: time.Minute,
			Notify: func(msg string) { t.Log("work:", msg) },
			OnDone: func(o Outcome) {
				if o.FromOutcome {
					fromRecord.Add(1)
				}
			}})
	}()
	restarted := killPostgres(t, pg, counter, kills, jobs)
	if err := <-errc; err != nil {
		t.Fatalf("Work: %v", err)
	}
	recovered := time.Since(restarted)
	var lost, dead int
	for _, id := range ids {
		j := b.get(t, id)
		switch {
		case j.Dead:
			dead++
			t.Errorf("job %d dead: %s", id, j.Reason)
		case j.State != "completed" || !j.HasResult:
			lost++
			t.Errorf("job %d: state %s, result %v", id, j.State, j.HasResult)
		}
	}
	dups := counter.check(t)
	t.Logf("%d jobs completed from the outcome record of an earlier attempt, handler not run again", fromRecord.Load())
	fmt.Printf("CHAOS|postgres-kill9-river|%d|%d|%d|%d|%.0f\n", jobs, lost, dups, dead, recovered.Seconds())
}

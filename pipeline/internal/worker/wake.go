package worker

// The wake-up of jobs that wait for an outage that just ended, and the
// renewal of a running job's lease.

import (
	"context"
	"sync"
	"time"

	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
)

// wakeEvery is how often wakeWaiting runs in one process: when an outage
// ends, every job that waited succeeds at about the same time, and one
// wake-up serves them all.
const wakeEvery = time.Second

// wakeWaiting makes the jobs of queue that wait for unavailable
// infrastructure available at once (River's JobRetry): a job of the queue
// has just succeeded after waiting, so the store, keeper or database is
// back, and the others resume within seconds instead of at the end of
// their waits (up to claimcheck.RetryPolicy.MaxWaitDelay each,
// docs/invariants.md, invariant 12). Jobs retrying a failure of their own
// keep their backoff. Best effort: a failure leaves the jobs to their own
// timers.
func (h *Host) wakeWaiting(ctx context.Context, queue string) {
	now := time.Now().UnixNano()
	last := h.lastWake.Load()
	if now-last < int64(wakeEvery) || !h.lastWake.CompareAndSwap(last, now) {
		return
	}
	// Ids only: the arguments, where inline payloads live, are not read.
	// The queue's own jobs have its kind as River kind, or the legacy one
	// (ownJobsSQL without the arguments).
	rows, err := h.DB.QueryContext(ctx, `SELECT id FROM river_job WHERE state = 'scheduled' AND queue = $1 AND kind IN ($2, $3) AND `+h.Jobs.WaitingSQL(),
		queue, jobs.QueueKind(queue), jobs.LegacyRiverKind)
	var ids []int64
	if err == nil {
		for rows.Next() {
			var id int64
			if err = rows.Scan(&id); err != nil {
				break
			}
			ids = append(ids, id)
		}
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		h.Logger.WarnContext(ctx, "pipeline: list the jobs waiting for the outage that just ended (they resume at their next try)", "queue", queue, "error", err.Error())
		return
	}
	woken := 0
	for _, id := range ids {
		if _, err := h.Client.JobRetry(ctx, id); err == nil {
			woken++
		}
	}
	if woken > 0 {
		h.Logger.InfoContext(ctx, "pipeline: an outage ended: waiting jobs resume now", "queue", queue, "jobs", woken)
	}
}

// A running job's lease is River's own attempted_at column: River's
// rescuer takes a running job whose attempted_at is older than the lease
// (Config.Lease, which is River's RescueStuckJobsAfter and the worker's
// Timeout), and the heartbeat below moves attempted_at forward every
// quarter lease while the handler runs. So a job whose worker died is
// rescued within the lease plus the rescuer's interval, while a job on a
// live worker is never taken from it, however long it runs.

// heartbeat renews job's lease every quarter lease until the returned stop
// is called. If the job is no longer running this attempt (rescued or
// released while this worker could not renew it), it cancels the handler
// with errLeaseLost. A failed renewal (database unavailable) is retried at
// the next beat; the lease allows three to fail in a row.
func (h *Host) heartbeat(ctx context.Context, id int64, attempt int, cancel context.CancelCauseFunc) (stop func()) {
	// A timer, not a goroutine with a ticker: most jobs end long before
	// their first beat, and a goroutine started and joined per job was
	// two scheduler hand-offs of every small job's work. The mutex is held
	// through a beat, so stop returns only once no beat runs or will.
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock() // t is set before the first beat reads it
	defer mu.Unlock()
	t = time.AfterFunc(h.Lease/4, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		bctx, bcancel := context.WithTimeout(ctx, h.Lease/4)
		res, err := h.DB.ExecContext(bctx, `UPDATE river_job SET attempted_at = `+jobs.DBNow(h.Dialect)+` WHERE id = $1 AND state = 'running' AND attempt = $2`, id, attempt)
		bcancel()
		if err != nil {
			h.Logger.WarnContext(ctx, "pipeline: renew job lease", "job", id, "error", err.Error())
		} else if n, err := res.RowsAffected(); err == nil && n == 0 {
			cancel(errLeaseLost)
			return
		}
		t.Reset(h.Lease / 4)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

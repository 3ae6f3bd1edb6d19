package worker

// The River client that runs workers (Work's, the relay's) until ctx is
// done or their queues are empty, then drains, and the set of running jobs
// a drain waits for.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
)

// RescuerInterval is how often River's rescuer looks for jobs whose lease
// expired (River's JobRescuerIntervalDefault, not configurable).
const RescuerInterval = 30 * time.Second

// RiverWorkers registers w under each of River kinds kinds and under
// jobs.LegacyRiverKind, for jobs enqueued before River kinds were claimcheck
// kinds: one worker for them all, which finds a job's handler by its
// arguments' kind. of is the arguments of a kind (jobs.Args or
// jobs.WorkArgs with JobKind set). Errors: River's, for a kind it refuses.
func RiverWorkers[T river.JobArgs](w river.Worker[T], of func(kind string) T, kinds ...string) (workers *river.Workers, err error) {
	workers = river.NewWorkers()
	defer func() { // AddWorkerArgs panics where AddWorkerSafely errs
		if v := recover(); v != nil {
			workers, err = nil, fmt.Errorf("register workers: %v", v)
		}
	}()
	seen := map[string]bool{}
	for _, k := range append(kinds, jobs.LegacyRiverKind) {
		if !seen[k] {
			seen[k] = true
			// River registers a worker under its args' Kind; AddWorkerArgs
			// (which River's docs keep for edge cases) is its one way to
			// register a type under kinds known only at run time.
			river.AddWorkerArgs(workers, of(k), w)
		}
	}
	return workers, nil
}

// Drain says how RunClient stops.
type Drain struct {
	// Timeout is how long, once ctx is done, running handlers may finish
	// (WorkOptions.DrainTimeout, its default applied by the caller;
	// negative: release at once). Abort, if closed, ends the drain at
	// once. Notify, if set, receives the drain's progress.
	Timeout time.Duration
	Abort   <-chan struct{}
	Notify  func(string)
	// Running is the worker's running jobs (Worker.Running); nil: the
	// relay, whose publishes end on their own.
	Running *Running
	// Filter, when set, narrows the jobs UntilEmpty waits for to those
	// this client works (a tenant-restricted worker leaves the others'
	// jobs, a relay the entries bound to another broker).
	Filter func(*river.JobListParams) *river.JobListParams
}

// SayStopping says that a stop began, and which of what is running it
// waits for.
func (d Drain) SayStopping(what, running string) {
	if running == "" {
		d.Say("stopping: taking no more %s; nothing is running", what)
		return
	}
	d.Say("stopping: taking no more %s; waiting up to %s for %s to finish (interrupt again to stop at once)", what, d.Timeout, running)
}

// Say passes one line to Notify, if set.
func (d Drain) Say(format string, args ...any) {
	if d.Notify != nil {
		d.Notify(fmt.Sprintf(format, args...))
	}
}

// RunClient runs a River client working queues until ctx is done or, with
// untilEmpty, until none of them holds a pending job; then it drains.
func (h *Host) RunClient(ctx context.Context, workers *river.Workers, queues map[string]river.QueueConfig, names []string, untilEmpty bool, d Drain) error {
	cfg := h.RiverConfig(workers)
	cfg.Queues = queues
	client, err := river.NewClient(h.Driver, cfg)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	// River cancels running jobs when Start's context is done: detach it,
	// so that ctx only starts the drain below.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("pipeline: start workers: %w", err)
	}
	if untilEmpty {
		err = h.waitEmpty(ctx, names, d)
	} else {
		<-ctx.Done()
	}
	stopped := make(chan error, 1)
	go func() { stopped <- client.Stop(context.WithoutCancel(ctx)) }()
	if ctx.Err() != nil && d.Running != nil {
		d.SayStopping("jobs", d.Running.list())
	}
	var serr error
	if d.Running == nil {
		serr = <-stopped
	} else {
		deadline := time.NewTimer(max(d.Timeout, 0))
		defer deadline.Stop()
		select {
		case serr = <-stopped:
		case <-deadline.C:
			if ids := d.Running.release(); ids != "" {
				d.Say("drain timeout of %s: %s go back to the queue, attempt not spent", d.Timeout, ids)
			}
			serr = <-stopped
		case <-d.Abort:
			if ids := d.Running.release(); ids != "" {
				d.Say("stopping at once: %s go back to the queue, attempt not spent", ids)
			}
			serr = <-stopped
		}
	}
	if serr != nil && err == nil {
		err = fmt.Errorf("pipeline: stop workers: %w", serr)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// waitNotice is how often waitEmpty says what it waits for, when that is
// a job running elsewhere.
const waitNotice = 30 * time.Second

// waitEmpty polls, one row at a time, until no job of the queues kinds is
// pending.
// Every waitNotice it names the jobs running on other workers it waits
// for, and when each would be rescued if its worker is gone.
func (h *Host) waitEmpty(ctx context.Context, kinds []string, d Drain) error {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	lastNotice := time.Now()
	failing := false
	params := river.NewJobListParams().Queues(kinds...).States(jobs.PendingStates...).First(1)
	if d.Filter != nil {
		params = d.Filter(params)
	}
	for {
		res, err := h.Client.JobList(ctx, params)
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			// The database is unavailable: the running jobs wait it out
			// (RetryPolicy), and so does the poll.
			if !failing {
				d.Say("the job database does not answer (%v); waiting for it", err)
			}
			failing = true
		case len(res.Jobs) == 0:
			return nil
		case failing:
			failing = false
			d.Say("the job database answers again")
		}
		if time.Since(lastNotice) >= waitNotice {
			lastNotice = time.Now()
			h.noticeRunning(ctx, kinds, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// TenantFilter restricts params to the jobs of tenants (all when none):
// the tenant in the job's arguments, read with ->> (PostgreSQL's jsonb
// operator, and SQLite's since 3.38).
func TenantFilter(params *river.JobListParams, tenants []string) *river.JobListParams {
	if len(tenants) == 0 {
		return params
	}
	names := make([]string, len(tenants))
	args := river.NamedArgs{}
	for i, t := range tenants {
		names[i] = fmt.Sprintf("@tenant%d", i)
		args[fmt.Sprintf("tenant%d", i)] = t
	}
	return params.Where("args ->> 'tenant' IN ("+strings.Join(names, ", ")+")", args)
}

// noticeRunning says which running jobs of kinds held by other workers
// waitEmpty waits for, and when each is rescued if its worker died.
func (h *Host) noticeRunning(ctx context.Context, kinds []string, d Drain) {
	res, err := h.Client.JobList(ctx, river.NewJobListParams().Queues(kinds...).States(rivertype.JobStateRunning).First(20))
	if err != nil || d.Notify == nil {
		return
	}
	for _, row := range res.Jobs {
		if d.Running != nil && d.Running.has(row.ID) {
			continue
		}
		if row.AttemptedAt == nil {
			continue
		}
		beat := *row.AttemptedAt
		d.Say("waiting for job %d (queue %s), running on another worker, lease renewed %s ago; if that worker is gone it is rescued by %s (lease %s + rescuer interval %s), or now with: claimcheck jobs release %d",
			row.ID, row.Queue, time.Since(beat).Round(time.Second), beat.Add(h.Lease+RescuerInterval).Local().Format(time.TimeOnly), h.Lease, RescuerInterval, row.ID)
	}
}

// running is the set of jobs this worker is running, for the drain.
type Running struct {
	mu   sync.Mutex
	jobs map[int64]*runningJob
}

type runningJob struct {
	kind    string
	started time.Time
	cancel  context.CancelCauseFunc
}

// NewRunning is an empty set.
func NewRunning() *Running { return &Running{jobs: map[int64]*runningJob{}} }

func (r *Running) add(id int64, kind string, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[id] = &runningJob{kind: kind, started: time.Now(), cancel: cancel}
}

func (r *Running) remove(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, id)
}

func (r *Running) has(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.jobs[id]
	return ok
}

// list describes the running jobs, "job 7 (pdf-info, running 3s)", "" if
// none.
func (r *Running) list() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int64, 0, len(r.jobs))
	for id := range r.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		j := r.jobs[id]
		parts = append(parts, fmt.Sprintf("job %d (%s, running %s)", id, j.kind, time.Since(j.started).Round(time.Second)))
	}
	return strings.Join(parts, ", ")
}

// release cancels every running handler with ErrReleased, so that its job
// goes back to the queue, and describes them.
func (r *Running) release() string {
	desc := r.list()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		j.cancel(ErrReleased)
	}
	return desc
}

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
)

// A running job's lease is River's own attempted_at column, renewed while
// its handler runs (pipeline/internal/worker, wake.go).

// ErrJobHeld is returned by ReleaseJob for a running job whose worker is
// alive: it renewed the job's lease less than a lease ago.
var ErrJobHeld = errors.New("job is held by a live worker")

// ErrNotRunning is returned by ReleaseJob for a job that is not running.
var ErrNotRunning = errors.New("job is not running")

// ReleaseOptions adjust ReleaseJob. The zero value is valid.
type ReleaseOptions struct {
	// Force releases the job even though its lease is fresh: for an
	// operator who knows its worker is gone (killed within the last
	// lease). A worker still running it loses the job at its next renewal
	// and cancels its handler.
	Force bool
}

// ReleaseJob returns a running job whose worker is gone to its queue now,
// without spending the attempt it was on, instead of waiting for the
// rescuer. Errors: ErrJobNotFound; ErrNotRunning; ErrJobHeld, naming when
// the lease was last renewed, while a live worker holds it (unless
// opts.Force). opts may be nil.
func (p *Pipeline) ReleaseJob(ctx context.Context, id int64, opts *ReleaseOptions) (*JobInfo, error) {
	var q string
	secs := p.cfg.Lease.Seconds()
	if opts != nil && opts.Force {
		secs = -1 // any lease
	}
	if p.dialect == "sqlite" {
		q = `UPDATE river_job SET state = 'available', attempt = max(attempt - 1, 0), scheduled_at = datetime('now', 'subsec')
			WHERE id = $1 AND state = 'running' AND attempted_at < datetime('now', 'subsec', $2) AND ` + ownJobsSQL
	} else {
		q = `UPDATE river_job SET state = 'available', attempt = GREATEST(attempt - 1, 0), scheduled_at = now()
			WHERE id = $1 AND state = 'running' AND attempted_at < now() - make_interval(secs => $2::float8) AND ` + ownJobsSQL
	}
	var arg any = secs
	if p.dialect == "sqlite" {
		arg = fmt.Sprintf("%+.3f seconds", -secs) // a datetime modifier
	}
	res, err := p.db.ExecContext(ctx, q, id, arg)
	if err != nil {
		return nil, fmt.Errorf("pipeline: release job %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("pipeline: release job %d: %w", id, err)
	}
	row, gerr := p.client.JobGet(ctx, id)
	if gerr != nil {
		if _, err := p.Get(ctx, id); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("pipeline: release job %d: %w", id, gerr)
	}
	j, err := jobs.InfoOf(row)
	if errors.Is(err, jobs.ErrNotOwn) {
		return nil, JobNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if n == 0 {
		if row.State != rivertype.JobStateRunning {
			return nil, fmt.Errorf("pipeline: release job %d in state %s: %w", id, row.State, ErrNotRunning)
		}
		beat := "never"
		if row.AttemptedAt != nil {
			beat = time.Since(*row.AttemptedAt).Round(time.Second).String() + " ago"
		}
		return nil, fmt.Errorf("pipeline: release job %d: lease renewed %s (lease %s): %w", id, beat, p.cfg.Lease, ErrJobHeld)
	}
	return j, nil
}

// Lease is the pipeline's job lease (Config.Lease).
func (p *Pipeline) Lease() time.Duration { return p.cfg.Lease }

package jobs

// Counting what List lists, and the job table's activity over time, for a
// console that must say exact numbers rather than count a capped page.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck"
)

// Count is Pipeline.Count (package pipeline documents it).
func (p *Jobs) Count(ctx context.Context, opts ListOptions) (int64, error) {
	switch opts.State {
	case string(rivertype.JobStateCompleted), StateSent, StateRetrying:
		var n int64
		err := p.List(ctx, ListOptions{State: opts.State, Kind: opts.Kind, Tenants: opts.Tenants, Since: opts.Since, PageSize: 1000},
			func(*JobInfo) error { n++; return nil })
		return n, err
	}
	if opts.State != "" {
		if err := ValidateState(opts.State); err != nil {
			return 0, fmt.Errorf("pipeline: %w", err)
		}
	}
	if opts.Kind != "" {
		if err := ValidateKind(opts.Kind); err != nil {
			return 0, fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrConfig)
		}
	}
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	where := []string{OwnJobsSQL}
	if opts.State != "" {
		quoted := make([]string, 0, 2)
		for _, s := range states[opts.State] {
			quoted = append(quoted, "'"+string(s)+"'")
		}
		cond := "state IN (" + strings.Join(quoted, ", ") + ")"
		if opts.State == StateDead { // and broker dead letters (see brokerDeadIDs)
			cond = "(" + cond + " OR (state = 'completed' AND queue LIKE '" + OutboxQueuePrefix + "%' AND EXISTS (SELECT 1 FROM claimcheck_consumed c WHERE c.job_id = river_job.id AND c.action = 'dead-lettered')))"
		}
		where = append(where, cond)
	}
	if opts.Kind != "" {
		where = append(where, p.argsField("kind")+" = "+arg(opts.Kind))
	}
	if len(opts.Tenants) > 0 {
		ph := make([]string, len(opts.Tenants))
		for i, t := range opts.Tenants {
			ph[i] = arg(t)
		}
		where = append(where, p.argsField("tenant")+" IN ("+strings.Join(ph, ", ")+")")
	}
	if !opts.Since.IsZero() {
		where = append(where, p.timeAtLeast("COALESCE(finalized_at, created_at)", arg(p.timeArg(opts.Since))))
	}
	var n int64
	if err := p.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM river_job WHERE `+strings.Join(where, " AND "), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("pipeline: count jobs: %w", err)
	}
	return n, nil
}

// argsField is the SQL text of a job argument's field (a JSON string).
func (p *Jobs) argsField(name string) string {
	if p.dialect == "sqlite" { // River keeps SQLite's JSON as JSONB
		return "args->>'$." + name + "'"
	}
	return "args->>'" + name + "'"
}

// timeArg is t as a statement argument compared by timeAtLeast: PostgreSQL
// takes the time, SQLite (where River keeps times as text in UTC) a text
// julianday reads.
func (p *Jobs) timeArg(t time.Time) any {
	if p.dialect == "sqlite" {
		return t.UTC().Format("2006-01-02 15:04:05.000000")
	}
	return t
}

// timeAtLeast is the SQL condition column >= placeholder (a timeArg).
func (p *Jobs) timeAtLeast(column, placeholder string) string {
	if p.dialect == "sqlite" {
		return "julianday(" + column + ") >= julianday(" + placeholder + ")"
	}
	return column + " >= " + placeholder
}

// timeBucket is the SQL text of column's time in whole steps of seconds
// since the Unix epoch (floor).
func (p *Jobs) timeBucket(column string, step int64) string {
	s := strconv.FormatInt(step, 10)
	if p.dialect == "sqlite" {
		return "CAST((julianday(" + column + ") - 2440587.5) * 86400.0 / " + s + " AS INTEGER)"
	}
	return "CAST(FLOOR(EXTRACT(EPOCH FROM " + column + ") / " + s + ") AS BIGINT)"
}

// ActivityPoint is one step of Activity: what happened to the job table's
// jobs (outbox entries left out, as QueueStats leaves them) from At to
// At plus the step.
type ActivityPoint struct {
	At time.Time `json:"at"`
	// Enqueued counts the jobs created in the step.
	Enqueued int64 `json:"enqueued"`
	// Completed and Dead count the jobs that finished in the step:
	// completed, or dead (cancelled or discarded).
	Completed int64 `json:"completed"`
	Dead      int64 `json:"dead"`
	// Depth is the number of jobs enqueued and not yet finished (waiting,
	// running, retrying or scheduled) at the end of the step.
	Depth int64 `json:"depth"`
}

// Activity is Pipeline.Activity (package pipeline documents it).
func (p *Jobs) Activity(ctx context.Context, since, now time.Time, step time.Duration) ([]ActivityPoint, error) {
	if step < time.Second || step > 24*time.Hour || !now.After(since) {
		return nil, fmt.Errorf("pipeline: activity: a step of 1 s to 1 day and since before now, not %v from %v to %v: %w", step, since, now, claimcheck.ErrConfig)
	}
	sec := int64(step / time.Second)
	first := since.Unix() / sec
	last := now.Unix() / sec
	points := make([]ActivityPoint, last-first+1)
	for i := range points {
		points[i].At = time.Unix((first+int64(i))*sec, 0)
	}
	start := p.timeArg(time.Unix(first*sec, 0))
	notOutbox := `queue NOT LIKE '` + OutboxQueuePrefix + `%'`
	var depth int64
	err := p.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM river_job WHERE `+notOutbox+` AND NOT `+p.timeAtLeast("created_at", "$1")+
		` AND (finalized_at IS NULL OR `+p.timeAtLeast("finalized_at", "$1")+`)`, start).Scan(&depth)
	if err != nil {
		return nil, fmt.Errorf("pipeline: activity: count the jobs unfinished at the start: %w", err)
	}
	add := func(query string, fn func(b int64, state string, n int64)) error {
		rows, err := p.db.QueryContext(ctx, query, start)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b, n int64
			var state string
			if err := rows.Scan(&b, &state, &n); err != nil {
				return err
			}
			if b >= first && b <= last {
				fn(b-first, state, n)
			}
		}
		return rows.Err()
	}
	err = add(`SELECT `+p.timeBucket("created_at", sec)+` AS b, '', COUNT(*) FROM river_job WHERE `+notOutbox+` AND `+p.timeAtLeast("created_at", "$1")+` GROUP BY b`,
		func(i int64, _ string, n int64) { points[i].Enqueued += n })
	if err == nil {
		err = add(`SELECT `+p.timeBucket("finalized_at", sec)+` AS b, CAST(state AS TEXT), COUNT(*) FROM river_job WHERE `+notOutbox+` AND finalized_at IS NOT NULL AND `+p.timeAtLeast("finalized_at", "$1")+` GROUP BY b, state`,
			func(i int64, state string, n int64) {
				switch rivertype.JobState(state) {
				case rivertype.JobStateCompleted:
					points[i].Completed += n
				case rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
					points[i].Dead += n
				}
			})
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: activity: %w", err)
	}
	for i := range points {
		depth += points[i].Enqueued - points[i].Completed - points[i].Dead
		points[i].Depth = max(depth, 0)
	}
	return points, nil
}

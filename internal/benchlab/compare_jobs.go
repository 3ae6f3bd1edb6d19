package benchlab

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"gocloud.dev/secrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/pipeline"
)

// The project's small-job goals, as ratios of claimcheck over plain River
// with the payload in its args, in the same round (the median over the
// rounds decides; a spread crossing the line is reported as such).
const (
	// GoalJobsEnqueue: claimcheck's enqueues per second over plain River's
	// inserts per second.
	GoalJobsEnqueue = 0.9
	// GoalJobsCPU: CPU per worked job over plain River's (at most).
	GoalJobsCPU = 1.2
	// GoalJobsLatency: p50 enqueue → handler latency over plain River's
	// (at most).
	GoalJobsLatency = 1.2
)

// Defaults of CompareJobs.
const (
	// DefaultCompareJobs is the jobs enqueued, and worked, per case and
	// round: issue 13's 10,000.
	DefaultCompareJobs = 10000
	// DefaultCompareLatencyJobs is the jobs of a latency case, enqueued one
	// at a time, each after the previous one reached its handler.
	DefaultCompareLatencyJobs = 200
	// DefaultCompareJobSize is each job's payload: 4 KiB, inline in its
	// ticket under the default inline threshold.
	DefaultCompareJobSize = bench.DefaultJobSize
	// compareJobWorkers is each side's workers (River's MaxWorkers, the
	// pipeline's Concurrency).
	compareJobWorkers = 4
)

// Case names of the small-job comparison.
const (
	CaseJobsEnqueue  = "claimcheck enqueue"
	CaseRiverInsert  = "river insert, payload in args"
	CaseJobsWork     = "claimcheck work"
	CaseRiverWork    = "river work"
	CaseJobsLatency  = "claimcheck enqueue→handler"
	CaseRiverLatency = "river insert→handler"
	latencyP50       = "p50 ms"
	riverQueue       = "bench_plain_river"
	riverKindPlain   = "bench_plain_river"
)

// JobsCompareConfig configures CompareJobs.
type JobsCompareConfig struct {
	// Databases are the job databases, each a URL as in
	// pipeline.Config.Database ("" stands for a fresh SQLite file in the
	// run's temporary directory). Default: [""]. A PostgreSQL database
	// is shared with plain River: both use its River tables, under queues
	// of their own, and the bench deletes every job of its queues after
	// each case.
	Databases []string
	// Dir holds the run's temporary directory (SQLite file, file store,
	// spool). Default os.TempDir().
	Dir string
	// Jobs per enqueue and work case and round. Default DefaultCompareJobs.
	Jobs int
	// LatencyJobs per latency case and round. Default
	// DefaultCompareLatencyJobs.
	LatencyJobs int
	// Size of each payload in bytes. Default DefaultCompareJobSize.
	Size int64
	// Rounds per database (default 3).
	Rounds int
	// Keeper seals claimcheck's payloads (encryption on, the command's
	// default). Default: a localsecrets keeper under a fresh random key.
	Keeper *secrets.Keeper
	// Log receives a line per measured run.
	Log io.Writer
	// ProfileDir, if set, receives a CPU profile (runtime/pprof) of the
	// first round of claimcheck's enqueue and work cases and of plain
	// River's work case (the reference to diff against, go tool pprof
	// -diff_base): <sqlite|postgres>-enqueue.pprof, -work.pprof and
	// -river-work.pprof.
	ProfileDir string
}

// plainArgs is plain River's job: the payload in its args (base64 in
// JSON), as a River user without a claim check would write it.
type plainArgs struct {
	Payload []byte `json:"payload"`
}

func (plainArgs) Kind() string { return riverKindPlain }

// CompareJobs runs claimcheck's job pipeline against plain River with the
// payload in its args, on each database, one group per database, Size
// payloads each (inline in the ticket at the default 4 KiB, sealed by
// Keeper):
//
//   - enqueue: Jobs enqueues one at a time (pipeline.Enqueue: check in,
//     then the job in its transaction) against Jobs River Inserts; ops/s.
//   - work: Jobs waiting jobs worked (the payload claimed and verified
//     before the handler, which reads it; River's handler reads its args)
//     by compareJobWorkers workers, from start to stop of the workers;
//     CPU ms per job (this process's user and system CPU).
//   - latency: LatencyJobs jobs enqueued one at a time, each once the
//     previous one reached its handler, with the workers running; the
//     median time from the start of the enqueue to the handler's first
//     line (claimcheck's after verification), in ms.
//
// Both sides use River's fetch settings of the pipeline (100 ms poll,
// pipeline.FetchCooldown), the same database and the same worker count; plain
// River on PostgreSQL is River's pgx driver (riverpgxv5), on SQLite
// riversqlite over the pipeline's connection.
func CompareJobs(ctx context.Context, cfg JobsCompareConfig) (*CompareReport, error) {
	if cfg.Jobs <= 0 {
		cfg.Jobs = DefaultCompareJobs
	}
	if cfg.LatencyJobs <= 0 {
		cfg.LatencyJobs = DefaultCompareLatencyJobs
	}
	if cfg.Size <= 0 {
		cfg.Size = DefaultCompareJobSize
	}
	dbs := cfg.Databases
	if len(dbs) == 0 {
		dbs = []string{""}
	}
	tmp, err := os.MkdirTemp(cfg.Dir, "claimcheck-compare-jobs-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(tmp)
	if tmp, err = filepath.Abs(tmp); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	keeper, closeKeeper, err := bench.KeeperOr(cfg.Keeper)
	if err != nil {
		return nil, err
	}
	defer closeKeeper()
	var groups []Group
	var notes []string
	for i, db := range dbs {
		j := &jobsCompare{cfg: cfg, profiled: map[string]bool{}, keeper: keeper, dir: filepath.Join(tmp, fmt.Sprintf("db%d", i)), database: db}
		groups = append(groups, j.group())
		notes = append(notes, fmt.Sprintf("%s: %s", j.kind(), bench.RedactURL(j.databaseOrDefault())))
	}
	rep, err := Compare(ctx, Comparison{Title: "claimcheck bench jobs --compare", Rounds: cfg.Rounds, Groups: groups, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	rep.Notes = append(notes, fmt.Sprintf("%d jobs of %s per enqueue and work case, %d per latency case; claimcheck's payloads sealed (a local keeper); %d workers each side",
		cfg.Jobs, bench.FormatSize(cfg.Size), cfg.LatencyJobs, compareJobWorkers))
	return rep, nil
}

type jobsCompare struct {
	cfg      JobsCompareConfig
	keeper   *secrets.Keeper
	dir      string
	database string

	store *claimcheck.Store
	p     *pipeline.Pipeline
	// rig is claimcheck's side (bench.JobRig); its Probe counts plain
	// River's handlers too.
	rig   *bench.JobRig
	pool  *pgxpool.Pool // PostgreSQL: plain River's
	river *river.Client[*sql.Tx]
	rpgx  *river.Client[pgx.Tx]
	// profiled: the cases whose profile is taken.
	profiled map[string]bool
}

func (j *jobsCompare) postgres() bool {
	return strings.HasPrefix(j.database, "postgres://") || strings.HasPrefix(j.database, "postgresql://")
}

func (j *jobsCompare) kind() string {
	if j.postgres() {
		return "postgres"
	}
	return "sqlite"
}

func (j *jobsCompare) databaseOrDefault() string {
	if j.database == "" {
		return filepath.Join(j.dir, "jobs.db")
	}
	return j.database
}

func (j *jobsCompare) group() Group {
	g := Group{Name: fmt.Sprintf("jobs, %s, %s", j.kind(), bench.FormatSize(j.cfg.Size))}
	g.Setup = j.setup
	g.Teardown = j.teardown
	n := int64(j.cfg.Jobs)
	cleanup := func(ctx context.Context) error { j.rig.Forget(); return j.deleteJobs(ctx) }
	g.Cases = []Case{
		{Name: CaseJobsEnqueue, Run: func(ctx context.Context) (Sample, error) {
			defer j.profile("enqueue")()
			return Sample{Ops: n}, j.rig.Enqueue(ctx, n)
		}, Cleanup: cleanup},
		{Name: CaseRiverInsert, Run: func(ctx context.Context) (Sample, error) {
			for range n {
				if err := j.riverInsert(ctx); err != nil {
					return Sample{}, err
				}
			}
			return Sample{Ops: n}, nil
		}, Cleanup: cleanup},
		{Name: CaseJobsWork, Prepare: func(ctx context.Context) error { return j.rig.Enqueue(ctx, n) },
			Run: func(ctx context.Context) (Sample, error) {
				defer j.profile("work")()
				return Sample{Ops: n}, j.rig.Work(ctx, n)
			}, Cleanup: cleanup},
		{Name: CaseRiverWork, Prepare: func(ctx context.Context) error { return j.riverInsertMany(ctx, n) },
			Run: func(ctx context.Context) (Sample, error) {
				defer j.profile("river-work")()
				return Sample{Ops: n}, j.workRiver(ctx, n)
			}, Cleanup: cleanup},
		{Name: CaseJobsLatency, Run: func(ctx context.Context) (Sample, error) {
			lat, _, err := j.rig.Latency(ctx, j.cfg.LatencyJobs)
			return latencySample(lat), err
		}, Cleanup: cleanup},
		{Name: CaseRiverLatency, Run: func(ctx context.Context) (Sample, error) {
			lat, err := bench.LatencyRun(ctx, j.rig.Probe(), j.cfg.LatencyJobs, j.startRiver, j.riverInsert)
			return latencySample(lat), err
		}, Cleanup: cleanup},
	}
	lat := MetricValue(latencyP50, true)
	g.Ratios = []RatioSpec{
		{Name: "enqueue / river insert", Subject: CaseJobsEnqueue, References: []string{CaseRiverInsert}, Metric: MetricOpsPerSec, Goal: GoalJobsEnqueue},
		{Name: "CPU per worked job / river", Subject: CaseJobsWork, References: []string{CaseRiverWork}, Metric: MetricCPUPerOp, Goal: GoalJobsCPU},
		{Name: "p50 enqueue→handler / river", Subject: CaseJobsLatency, References: []string{CaseRiverLatency}, Metric: lat, Goal: GoalJobsLatency},
	}
	return g
}

func (j *jobsCompare) setup(ctx context.Context) error {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return err
	}
	var err error
	j.store, err = claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(j.dir, "store")),
		&claimcheck.Options{SpoolDir: j.dir, Keeper: j.keeper})
	if err != nil {
		return err
	}
	if j.p, err = pipeline.Open(ctx, pipeline.Config{Database: j.databaseOrDefault(), Store: j.store}); err != nil {
		return err
	}
	j.rig = bench.NewJobRig(j.p, j.cfg.Size, compareJobWorkers)
	if err := j.deleteJobs(ctx); err != nil { // a killed run's
		return err
	}
	if j.postgres() {
		if j.pool, err = pgxpool.New(ctx, j.database); err != nil {
			return err
		}
		j.rpgx, err = river.NewClient(riverpgxv5.New(j.pool), j.riverConfig(nil))
		return err
	}
	j.river, err = river.NewClient(riversqlite.New(j.p.DB()), j.riverConfig(nil))
	return err
}

func (j *jobsCompare) teardown(ctx context.Context) {
	if j.p != nil {
		_ = j.deleteJobs(ctx)
		j.p.Close()
	}
	if j.pool != nil {
		j.pool.Close()
	}
	if j.store != nil {
		j.store.Close()
	}
}

// riverConfig is plain River's configuration: the pipeline's fetch
// settings (pipeline.Open's River config).
func (j *jobsCompare) riverConfig(workers *river.Workers) *river.Config {
	c := &river.Config{FetchPollInterval: 100 * time.Millisecond, FetchCooldown: pipeline.FetchCooldown,
		Logger: slog.New(slog.DiscardHandler), Workers: workers}
	if workers != nil {
		c.Queues = map[string]river.QueueConfig{riverQueue: {MaxWorkers: compareJobWorkers}}
	}
	return c
}

// deleteJobs deletes every job of the bench's queues, and their registry
// rows.
func (j *jobsCompare) deleteJobs(ctx context.Context) error {
	db := j.p.DB()
	if _, err := db.ExecContext(ctx, `DELETE FROM claimcheck_claim WHERE job_id IN (SELECT id FROM river_job WHERE queue = $1)`, bench.JobsKind); err != nil {
		return fmt.Errorf("bench: delete the bench's jobs: %w", err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM river_job WHERE queue IN ($1, $2)`, bench.JobsKind, riverQueue); err != nil {
		return fmt.Errorf("bench: delete the bench's jobs: %w", err)
	}
	return nil
}

func (j *jobsCompare) insertOpts() *river.InsertOpts { return &river.InsertOpts{Queue: riverQueue} }

// riverInsert is plain River's Insert of one job (its own transaction).
func (j *jobsCompare) riverInsert(ctx context.Context) error {
	var err error
	if j.rpgx != nil {
		_, err = j.rpgx.Insert(ctx, plainArgs{Payload: j.rig.Payload()}, j.insertOpts())
	} else {
		_, err = j.river.Insert(ctx, plainArgs{Payload: j.rig.Payload()}, j.insertOpts())
	}
	return err
}

// riverInsertMany inserts n jobs, unmeasured, for a work case.
func (j *jobsCompare) riverInsertMany(ctx context.Context, n int64) error {
	for n > 0 {
		batch := make([]river.InsertManyParams, min(n, 500))
		for i := range batch {
			batch[i] = river.InsertManyParams{Args: plainArgs{Payload: j.rig.Payload()}, InsertOpts: j.insertOpts()}
		}
		var err error
		if j.rpgx != nil {
			_, err = j.rpgx.InsertMany(ctx, batch)
		} else {
			_, err = j.river.InsertMany(ctx, batch)
		}
		if err != nil {
			return err
		}
		n -= int64(len(batch))
	}
	return nil
}

// startRiver starts plain River's workers on its queue.
func (j *jobsCompare) startRiver(ctx context.Context) (func() error, error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[plainArgs]) error {
		j.rig.Probe().Began()
		if len(job.Args.Payload) != int(j.cfg.Size) {
			return errors.New("bench: plain River job of the wrong size")
		}
		return nil
	})); err != nil {
		return nil, err
	}
	var start func(context.Context) error
	var stop func(context.Context) error
	if j.rpgx != nil {
		c, err := river.NewClient(riverpgxv5.New(j.pool), j.riverConfig(workers))
		if err != nil {
			return nil, err
		}
		start, stop = c.Start, c.Stop
	} else {
		c, err := river.NewClient(riversqlite.New(j.p.DB()), j.riverConfig(workers))
		if err != nil {
			return nil, err
		}
		start, stop = c.Start, c.Stop
	}
	if err := start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	return func() error { return stop(context.WithoutCancel(ctx)) }, nil
}

// profile starts the CPU profile of a case's first round, if asked for,
// and returns what stops it.
func (j *jobsCompare) profile(what string) func() {
	if j.cfg.ProfileDir == "" || j.profiled[what] {
		return func() {}
	}
	j.profiled[what] = true
	return startCPUProfile(filepath.Join(j.cfg.ProfileDir, j.kind()+"-"+what+".pprof"))
}

func (j *jobsCompare) workRiver(ctx context.Context, n int64) error {
	return bench.WorkN(ctx, j.rig.Probe(), n, j.startRiver)
}

// latencySample is a latency case's sample: the p50 of sorted lat (ms).
func latencySample(lat []float64) Sample {
	if len(lat) == 0 {
		return Sample{}
	}
	return Sample{Ops: int64(len(lat)), Values: map[string]float64{latencyP50: bench.Percentile(lat, 50)}}
}

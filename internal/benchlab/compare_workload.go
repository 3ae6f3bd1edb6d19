package benchlab

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/pipeline"
)

// The workload's goals (issue 29), as ratios of claimcheck over a
// reference in the same round (median over the rounds).
const (
	// GoalWorkloadSDK: claimcheck's jobs/s and payload MiB/s over the
	// store's plain SDK moving the same bytes at the same concurrency (at
	// least).
	GoalWorkloadSDK = 0.8
	// GoalWorkloadP99: claimcheck's p99 enqueue → handler latency over
	// plain River's with the payload inline (at most: better than it).
	GoalWorkloadP99 = 1.0
)

// Case names of the workload comparison.
const (
	CaseWorkload      = "claimcheck workload"
	CaseWorkloadRiver = "river, payload inline in args"
	CaseWorkloadSDK   = "store SDK put+get"
	workloadP50       = "p50 ms"
	workloadP95       = "p95 ms"
	workloadP99       = "p99 ms"
	workloadTable     = "table B/job"
	riverWorkloadKind = "bench_plain_river_workload"
)

// WorkloadCompareConfig configures CompareWorkload.
type WorkloadCompareConfig struct {
	// Pipeline is claimcheck's deployment (its job database and store),
	// opened as the shipped bench workload opens it. Required.
	Pipeline *pipeline.Pipeline
	// Database is its job database's URL ("postgres://…" or a SQLite
	// one): plain River uses the same database (River's pgx driver on
	// PostgreSQL, riversqlite over the pipeline's connection on SQLite).
	Database string
	// Store is its store's URL, for the SDK reference: on s3:// the AWS
	// SDK over the store's client, on file:// plain files in the store's
	// directory.
	Store string
	// Dir is a scratch directory (the file reference's files when the
	// store is not file://).
	Dir string
	// Jobs, Mix, Seed, Producers and Workers as bench.WorkloadConfig's.
	Jobs               int
	Mix                bench.Mix
	Seed               uint64
	Producers, Workers int
	// Rate paces the jobs of every case (bench.WorkloadSpec.Rate).
	Rate float64
	// Rounds (default 5).
	Rounds int
	// Log receives a line per measured run.
	Log io.Writer
	// ProfileDir, if set, receives a CPU profile (runtime/pprof) of the
	// first round of claimcheck's case: <sqlite|postgres>-workload.pprof.
	ProfileDir string
}

// CompareWorkload runs the workload (bench.RunWorkload, the sizes of Mix
// and Seed) through claimcheck's pipeline and, in the same run and
// alternated per round, through two references with the same sizes, the
// same producers and workers:
//
//   - plain River with the payload inline in its args (base64 in JSON,
//     what the claim-check pattern warns against), in the same job
//     database;
//   - the store's own throughput for the same bytes with the plain SDK:
//     on s3:// each payload PUT by a producer with the AWS SDK's
//     transfer manager (the store's client, claimcheck's part size),
//     then GET by a worker (GetObject into io.Discard); on file:// each
//     written to a file and fsynced by a producer, then read by a worker.
//
// Each case reports jobs/s and MiB/s (first enqueue to last handler),
// p50/p95/p99 enqueue → handler latency and the job table's bytes per job
// (bench.TableBytes); the ratios put claimcheck against the SDK
// (throughput, goal ≥ 0.8) and against River inline (latency, goal p99 ≤
// 1.0; table bytes).
func CompareWorkload(ctx context.Context, cfg WorkloadCompareConfig) (*CompareReport, error) {
	if cfg.Jobs <= 0 {
		cfg.Jobs = bench.DefaultWorkloadJobs
	}
	if len(cfg.Mix) == 0 {
		m, err := bench.ParseMix(bench.DefaultMix)
		if err != nil {
			return nil, err
		}
		cfg.Mix = m
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 5
	}
	cfg.Producers, cfg.Workers = max(cfg.Producers, 1), max(cfg.Workers, 1)
	w := &workloadCompare{cfg: cfg, sizes: cfg.Mix.Sizes(cfg.Seed, cfg.Jobs)}
	g := w.group()
	rep, err := Compare(ctx, Comparison{Title: "claimcheck-bench bench workload --compare", Rounds: cfg.Rounds, Groups: []Group{g}, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	var total int64
	for _, n := range w.sizes {
		total += n
	}
	p := cfg.Pipeline
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("database %s, store %s", bench.RedactURL(cfg.Database), bench.RedactURL(cfg.Store)),
		fmt.Sprintf("%d jobs, mix %s (seed %d), %s in all; %d producers, %d workers each side, %s; claimcheck's inline threshold %d bytes, sealed %v",
			cfg.Jobs, cfg.Mix, cfg.Seed, bench.FormatSize(total), cfg.Producers, cfg.Workers, pace(cfg.Rate), p.Store().InlineThreshold(), p.Store().Seals()),
		"latency: from the start of a job's enqueue to its handler's start (claimcheck's after verification); seconds: first enqueue to last handler",
		"table B/job: "+w.tableMethod(),
		"sdk: "+w.sdkWhat(),
		fmt.Sprintf("goals: jobs/s and MiB/s ≥ %.1f × the store SDK's; p50 ≤ River inline's + one store round trip + 2 ms (compare the p50 columns); p99 ≤ River inline's; table B/job ≤ 1 KiB", GoalWorkloadSDK))
	return rep, nil
}

// pace says how the jobs are paced.
func pace(rate float64) string {
	if rate > 0 {
		return fmt.Sprintf("paced at %g jobs/s", rate)
	}
	return "unpaced (latency includes the wait in the queue the producers fill)"
}

type workloadCompare struct {
	cfg   WorkloadCompareConfig
	sizes []int64
	cc    *bench.PipelineTarget
	river *riverTarget
	sdk   *sdkTarget
	// before is the job tables' size as a case started (bench.TableBytes).
	before int64
	// profiled: claimcheck's case has had its profile (ProfileDir).
	profiled bool
}

// profile starts the CPU profile of claimcheck's first round, if asked
// for, and returns what stops it.
func (w *workloadCompare) profile() func() {
	if w.cfg.ProfileDir == "" || w.profiled {
		return func() {}
	}
	w.profiled = true
	return startCPUProfile(filepath.Join(w.cfg.ProfileDir, w.cfg.Pipeline.Dialect()+"-workload.pprof"))
}

func (w *workloadCompare) postgres() bool {
	return strings.HasPrefix(w.cfg.Database, "postgres://") || strings.HasPrefix(w.cfg.Database, "postgresql://")
}

func (w *workloadCompare) tableMethod() string {
	_, m, _ := bench.TableBytes(context.Background(), w.cfg.Pipeline.DB(), w.cfg.Pipeline.Dialect(), riverWorkloadKind)
	return m
}

func (w *workloadCompare) sdkWhat() string {
	if w.sdk != nil && w.sdk.s3 != nil {
		return "AWS SDK transfer manager upload (claimcheck's part size and concurrency, CRC32C) by the producers, GetObject into io.Discard by the workers, on the store's client"
	}
	return "each payload written to a file and fsynced by a producer, read into io.Discard by a worker, in the store's directory"
}

func (w *workloadCompare) group() Group {
	g := Group{Name: fmt.Sprintf("workload, %s, %s", w.cfg.Pipeline.Dialect(), storeScheme(w.cfg.Store))}
	g.Setup = w.setup
	g.Teardown = w.teardown
	content := bench.NewContentSeed()
	round := 0
	spec := func() bench.WorkloadSpec {
		round++ // a new content each run: nothing deduplicated against an earlier one
		return bench.WorkloadSpec{Sizes: w.sizes, Content: bench.WorkloadContent(content+uint64(round), w.sizes), Producers: w.cfg.Producers, Rate: w.cfg.Rate}
	}
	p := w.cfg.Pipeline
	prepare := func(ctx context.Context) (err error) {
		w.before, _, err = bench.TableBytes(ctx, p.DB(), p.Dialect(), riverWorkloadKind)
		return err
	}
	run := func(t bench.WorkloadTarget, kind string) func(ctx context.Context) (Sample, error) {
		return func(ctx context.Context) (Sample, error) {
			s, err := bench.RunWorkload(ctx, t, spec())
			if err != nil {
				return Sample{}, err
			}
			out := Sample{Seconds: s.Seconds, Ops: int64(s.Jobs), Bytes: s.Bytes, Values: map[string]float64{
				workloadP50: s.Percentile(50), workloadP95: s.Percentile(95), workloadP99: s.Percentile(99)}}
			if kind != "" {
				after, _, err := bench.TableBytes(ctx, p.DB(), p.Dialect(), kind)
				if err != nil {
					return Sample{}, err
				}
				out.Values[workloadTable] = float64(after-w.before) / float64(s.Jobs)
			}
			return out, nil
		}
	}
	g.Cases = []Case{
		{Name: CaseWorkload, Prepare: prepare, Run: func(ctx context.Context) (Sample, error) {
			defer w.profile()()
			return run(w.cc, bench.WorkloadKind)(ctx)
		},
			Cleanup: func(ctx context.Context) error { return w.cc.Cleanup(ctx) }},
		{Name: CaseWorkloadRiver, Prepare: func(ctx context.Context) error {
			if err := w.river.open(ctx); err != nil {
				return err
			}
			return prepare(ctx)
		}, Run: func(ctx context.Context) (Sample, error) { return run(w.river, riverWorkloadKind)(ctx) },
			Cleanup: func(ctx context.Context) error { return w.river.cleanup(ctx) }},
		{Name: CaseWorkloadSDK, Prepare: func(ctx context.Context) error { w.sdk.reset(len(w.sizes)); return nil },
			Run:     func(ctx context.Context) (Sample, error) { return run(w.sdk, "")(ctx) },
			Cleanup: func(ctx context.Context) error { return w.sdk.cleanup(ctx) }},
	}
	g.Ratios = []RatioSpec{
		{Name: "jobs/s / store SDK", Subject: CaseWorkload, References: []string{CaseWorkloadSDK}, Metric: MetricOpsPerSec, Goal: GoalWorkloadSDK},
		{Name: "MiB/s / store SDK", Subject: CaseWorkload, References: []string{CaseWorkloadSDK}, Metric: MetricMiBPerSec, Goal: GoalWorkloadSDK},
		{Name: "jobs/s / river inline", Subject: CaseWorkload, References: []string{CaseWorkloadRiver}, Metric: MetricOpsPerSec},
		{Name: "p50 enqueue→handler / river inline", Subject: CaseWorkload, References: []string{CaseWorkloadRiver}, Metric: MetricValue(workloadP50, true)},
		{Name: "p95 enqueue→handler / river inline", Subject: CaseWorkload, References: []string{CaseWorkloadRiver}, Metric: MetricValue(workloadP95, true)},
		{Name: "p99 enqueue→handler / river inline", Subject: CaseWorkload, References: []string{CaseWorkloadRiver}, Metric: MetricValue(workloadP99, true), Goal: GoalWorkloadP99},
		{Name: "job-table bytes per job / river inline", Subject: CaseWorkload, References: []string{CaseWorkloadRiver}, Metric: MetricValue(workloadTable, true)},
	}
	return g
}

// storeScheme is a store URL's scheme, for the group's name.
func storeScheme(storeURL string) string {
	scheme, _, _ := strings.Cut(storeURL, "://")
	return scheme
}

func (w *workloadCompare) setup(ctx context.Context) error {
	p := w.cfg.Pipeline
	w.cc = &bench.PipelineTarget{P: p, Kind: bench.WorkloadKind, Tenant: bench.WorkloadTenant, Workers: w.cfg.Workers}
	if _, err := bench.DeleteKind(ctx, p, bench.WorkloadKind); err != nil { // a killed run's
		return err
	}
	w.river = &riverTarget{db: p.DB(), workers: w.cfg.Workers}
	if w.postgres() {
		w.river.database = w.cfg.Database
	}
	if err := w.river.open(ctx); err != nil {
		return err
	}
	if err := w.river.cleanup(ctx); err != nil { // a killed run's
		return err
	}
	var err error
	w.sdk, err = newSDKTarget(ctx, w.cfg, p)
	return err
}

func (w *workloadCompare) teardown(ctx context.Context) {
	if w.river != nil && w.river.open(ctx) == nil {
		_ = w.river.cleanup(ctx)
	}
	if w.sdk != nil {
		_ = w.sdk.cleanup(ctx)
	}
}

// workloadArgs is plain River's workload job: the payload in its args.
type workloadArgs struct {
	Payload []byte `json:"payload"`
}

func (workloadArgs) Kind() string { return riverWorkloadKind }

// riverTarget is plain River with the payload inline in its args as a
// bench.WorkloadTarget: each payload read into memory and inserted with
// River's Insert; its handler takes the payload from the args.
type riverTarget struct {
	db       *sql.DB // SQLite: the pipeline's connection
	database string  // PostgreSQL: its URL ("" on SQLite)
	// pool is PostgreSQL's, opened for each run (open) and closed after
	// it (cleanup): pgx keeps read buffers as large as the largest row it
	// read, which would otherwise stay in this process's memory through
	// claimcheck's case.
	pool    *pgxpool.Pool
	workers int
	// insert is an insert-only client's Insert.
	insert func(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// open connects to PostgreSQL and makes the insert-only client.
func (t *riverTarget) open(ctx context.Context) error {
	if t.database != "" {
		pool, err := pgxpool.New(ctx, t.database)
		if err != nil {
			return err
		}
		t.pool = pool
		c, err := river.NewClient(riverpgxv5.New(t.pool), t.config(nil))
		if err != nil {
			return err
		}
		t.insert = c.Insert
		return nil
	}
	c, err := river.NewClient(riversqlite.New(t.db), t.config(nil))
	if err != nil {
		return err
	}
	t.insert = c.Insert
	return nil
}

func (t *riverTarget) config(workers *river.Workers) *river.Config {
	c := &river.Config{FetchPollInterval: 100 * time.Millisecond, FetchCooldown: pipeline.FetchCooldown,
		Logger: slog.New(slog.DiscardHandler), Workers: workers}
	if workers != nil {
		c.Queues = map[string]river.QueueConfig{riverWorkloadKind: {MaxWorkers: t.workers}}
	}
	return c
}

func (t *riverTarget) Enqueue(ctx context.Context, i int, r io.Reader, size int64) (int64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	res, err := t.insert(ctx, workloadArgs{Payload: b}, &river.InsertOpts{Queue: riverWorkloadKind})
	if err != nil {
		return 0, err
	}
	return res.Job.ID, nil
}

func (t *riverTarget) Start(ctx context.Context, h *bench.WorkloadHooks) (func() error, error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[workloadArgs]) error {
		h.Began(job.ID)
		h.Done(job.ID, int64(len(job.Args.Payload)))
		return nil
	})); err != nil {
		return nil, err
	}
	var start, stop func(context.Context) error
	if t.pool != nil {
		c, err := river.NewClient(riverpgxv5.New(t.pool), t.config(workers))
		if err != nil {
			return nil, err
		}
		start, stop = c.Start, c.Stop
	} else {
		c, err := river.NewClient(riversqlite.New(t.db), t.config(workers))
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

// cleanup deletes every job of plain River's workload queue and closes
// the PostgreSQL connections.
func (t *riverTarget) cleanup(ctx context.Context) error {
	var err error
	if t.pool != nil {
		_, err = t.pool.Exec(ctx, `DELETE FROM river_job WHERE queue = $1`, riverWorkloadKind)
		if err == nil {
			// The round's ~1 GB of arguments are dead rows now: vacuumed,
			// the next rounds reuse their space; left to autovacuum, a day
			// of runs grew one database to 28 GB and filled the disk.
			_, err = t.pool.Exec(ctx, `VACUUM river_job`)
		}
		t.pool.Close()
		t.pool = nil
	} else {
		_, err = t.db.ExecContext(ctx, `DELETE FROM river_job WHERE queue = $1`, riverWorkloadKind)
	}
	if err != nil {
		return fmt.Errorf("bench: delete and vacuum plain River's workload jobs: %w", err)
	}
	return nil
}

// sdkTarget is the store's plain SDK as a bench.WorkloadTarget: a
// producer puts the payload (Enqueue), a worker gets it.
type sdkTarget struct {
	s3      *sdkRunner // s3:// stores
	dir     string     // file:// (or other) stores: the files' directory
	workers int
	mu      sync.Mutex
	ch      chan int64
	put     []string // keys or paths written
}

func newSDKTarget(ctx context.Context, cfg WorkloadCompareConfig, p *pipeline.Pipeline) (*sdkTarget, error) {
	st := p.Store()
	if bench.IsS3(cfg.Store) {
		r, err := newSDKRunner(ctx, st, cfg.Store, bench.WorkloadTenant, 0, nil, nil)
		if err != nil {
			return nil, err
		}
		r.prefix = st.Namespace() + r.prefix // inside the bench's namespace
		return &sdkTarget{s3: r, workers: cfg.Workers}, nil
	}
	dir := filepath.Join(cfg.Dir, "sdk-files")
	if u, err := url.Parse(cfg.Store); err == nil && u.Scheme == "file" {
		dir = filepath.Join(filepath.FromSlash(u.Path), filepath.FromSlash(st.Namespace()), "bench-sdk-files")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &sdkTarget{dir: dir, workers: cfg.Workers}, nil
}

// reset readies the target for a run of n jobs.
func (t *sdkTarget) reset(n int) { t.ch = make(chan int64, n) }

func (t *sdkTarget) name(i int64) string {
	if t.s3 != nil {
		return t.s3.prefix + "w" + strconv.FormatInt(i, 10)
	}
	return filepath.Join(t.dir, "w"+strconv.FormatInt(i, 10))
}

func (t *sdkTarget) Enqueue(ctx context.Context, i int, r io.Reader, size int64) (int64, error) {
	id := int64(i)
	name := t.name(id)
	t.mu.Lock()
	t.put = append(t.put, name)
	t.mu.Unlock()
	if t.s3 != nil {
		if err := t.s3.upload(name, r, size); err != nil {
			return 0, err
		}
	} else if err := writeFsync(name, r); err != nil {
		return 0, err
	}
	t.ch <- id
	return id, nil
}

func (t *sdkTarget) Start(ctx context.Context, h *bench.WorkloadHooks) (func() error, error) {
	wctx, cancel := context.WithCancel(ctx)
	ch := t.ch
	var wg sync.WaitGroup
	for range max(1, t.workers) {
		wg.Go(func() {
			for {
				select {
				case <-wctx.Done():
					return
				case id := <-ch:
					h.Began(id)
					n, err := t.get(wctx, t.name(id))
					if err != nil {
						h.Fail(err)
						return
					}
					h.Done(id, n)
				}
			}
		})
	}
	return func() error { cancel(); wg.Wait(); return nil }, nil
}

func (t *sdkTarget) get(ctx context.Context, name string) (int64, error) {
	if t.s3 != nil {
		return t.s3.download(name)
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.Copy(io.Discard, f)
}

// cleanup deletes what the target wrote.
func (t *sdkTarget) cleanup(ctx context.Context) error {
	t.mu.Lock()
	put := t.put
	t.put = nil
	t.mu.Unlock()
	for _, name := range put {
		if t.s3 != nil {
			t.s3.delete(name)
		} else if err := os.Remove(name); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// writeFsync writes r to a new file at path and fsyncs it.
func writeFsync(path string, r io.Reader) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

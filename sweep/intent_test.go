package sweep_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/stores/s3store/s3test"
	"github.com/claimcheck/claimcheck/sweep"
)

// s3TestStore opens a fresh bucket of its own on the S3 server of
// CLAIMCHECK_TEST_S3_URL (SeaweedFS: scripts/seaweedfs.sh), emptied and
// deleted when t ends; it skips t when the variable is unset (and fails
// when CI is set).
func s3TestStore(t *testing.T, opts *claimcheck.Options) *claimcheck.Store {
	t.Helper()
	return s3TestStoreVia(t, "", opts)
}

// s3URL is the S3 server's store URL (CLAIMCHECK_TEST_S3_URL): t skips
// without it, and fails when CI is set.
func s3URL(t *testing.T) string {
	t.Helper()
	return s3test.URL(t)
}

// s3TestStoreVia is s3TestStore with the store's requests sent to
// endpoint (a fault-injecting proxy in front of the server) when set.
func s3TestStoreVia(t *testing.T, endpoint string, opts *claimcheck.Options) *claimcheck.Store {
	t.Helper()
	b := s3test.New(t, "sweep")
	raw := b.URL
	if endpoint != "" {
		raw = b.URLVia(endpoint)
	}
	ctx := context.Background()
	store, err := claimcheck.OpenStore(ctx, raw, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = store.IncompleteUploads(ctx, "", func(up claimcheck.IncompleteUpload) error { return store.AbortUpload(ctx, up) })
		store.Close()
	})
	return store
}

// stores runs fn on SQLite with a file store and on PostgreSQL with a file
// store and, when CLAIMCHECK_TEST_S3_URL is set, with SeaweedFS.
func stores(t *testing.T, fn func(t *testing.T, b *bundle)) {
	t.Run("sqlite+file", func(t *testing.T) { fn(t, setup(t, "")) })
	t.Run("postgres+file", func(t *testing.T) { fn(t, setup(t, dbtest.Postgres(t))) })
	t.Run("postgres+s3", func(t *testing.T) {
		database := dbtest.Postgres(t)
		store := s3TestStore(t, &claimcheck.Options{AlwaysOffload: true, SpoolDir: t.TempDir()})
		b := &bundle{ctx: t.Context(), store: store}
		var err error
		if b.pipe, err = pipeline.Open(b.ctx, pipeline.Config{Database: database, Store: store}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.pipe.Close() })
		fn(t, b)
	})
}

// holdLock blocks every writer of the registry's claimcheck_claim table
// until the returned function is called: on PostgreSQL a LOCK TABLE in
// EXCLUSIVE mode (readers, such as the sweep's look-ups, still read), on
// SQLite the database's write lock (BEGIN IMMEDIATE), held by a
// connection of its own.
func holdLock(t *testing.T, b *bundle, database string) func() {
	t.Helper()
	target, err := dbopen.Parse(database)
	if err != nil {
		t.Fatal(err)
	}
	db, err := dbopen.Open(b.ctx, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if target.Dialect == dbopen.Postgres {
		_, err = tx.ExecContext(b.ctx, `LOCK TABLE claimcheck_claim IN EXCLUSIVE MODE`)
	} else {
		_, err = tx.ExecContext(b.ctx, `INSERT INTO claimcheck_intent (object_key, ticket_ns, tenant, recorded_ms) VALUES ('lock', 0, 'lock', 0)`)
	}
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { _ = tx.Rollback(); _ = db.Close() }) }
	t.Cleanup(release)
	return release
}

// A producer pauses between its upload and its commit (its transaction
// waits on a lock another connection holds on the job database) while a
// sweeper whose clock runs two hours ahead sweeps with the shortest grace
// period (1 h): every object looks two hours old, so without the check-in
// intent the fresh payload would be deleted as an orphan, and the job
// would die payload-missing on attempt 1. The producer then commits, and
// the job completes.
func TestSweepClockAheadProducerPaused(t *testing.T) {
	stores(t, func(t *testing.T, b *bundle) {
		database := b.database(t)
		body := strings.Repeat("a payload acknowledged to its producer. ", 4096)
		tk, err := b.pipe.CheckIn(b.ctx, tenant, strings.NewReader(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The sweeper: its own connection to the job database, as a
		// separate process has.
		sweeper := b.second(t, database)
		release := holdLock(t, b, database)
		type result struct {
			res *pipeline.EnqueueResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := b.enqueueTx(tk)
			done <- result{res, err}
		}()

		ahead := func() time.Time { return time.Now().Add(2 * time.Hour) }
		rep, err := sweep.Sweep(b.ctx, sweep.Options{Store: b.store, DB: sweeper.DB(), Grace: time.Hour, Now: ahead, AllowEmptyRegistry: true})
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, "sweeper clock 2h ahead, producer paused between upload and commit", rep)
		if got := decisions(rep)[tk.Key]; got != "kept checking-in" {
			t.Errorf("the paused producer's object: %q, want kept checking-in", got)
		}
		select {
		case r := <-done:
			t.Fatalf("the producer committed while the lock was held: %+v, %v", r.res, r.err)
		default:
		}
		release()
		r := <-done
		if r.err != nil {
			t.Fatalf("the producer's enqueue: %v", r.err)
		}
		var got string
		b.work(t, "paused", func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			rd, err := job.Payload.Open(ctx)
			if err != nil {
				return nil, err
			}
			defer rd.Close()
			b, err := io.ReadAll(rd)
			got = string(b)
			return nil, err
		})
		if st := b.state(t, r.res.JobID); st != "completed" || got != body {
			j, _ := b.pipe.Get(b.ctx, r.res.JobID)
			t.Fatalf("job %d is %s (%+v), handler saw %d bytes; want completed with the %d-byte payload", r.res.JobID, st, j, len(got), len(body))
		}
		t.Logf("producer committed after the sweep; job %d completed on attempt 1", r.res.JobID)
	})
}

// One goroutine checks the same bytes in again and again (each round a new
// job that reuses the object), each job's reference is released on
// acknowledgement (delete-on-ack: the object goes with the last reference),
// and a sweeper whose clock runs two days ahead sweeps all the while: every
// unreferenced object is an orphan to it. Every job enqueued must claim its
// payload.
func TestSweepReuseRace(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	stores(t, func(t *testing.T, b *bundle) {
		body := strings.Repeat("the same bytes, checked in again and again. ", 64)
		var (
			losses, releasedDeletes, sweptDeletes atomic.Int64
			stop                                  = make(chan struct{})
			wg                                    sync.WaitGroup
			acked                                 = make(chan *pipeline.EnqueueResult, 4)
		)
		wg.Go(func() { // releases
			for res := range acked {
				deleted, err := b.pipe.Release(b.ctx, res.JobID, "", res.Ticket)
				if err != nil {
					t.Errorf("release job %d: %v", res.JobID, err)
					continue
				}
				if deleted {
					releasedDeletes.Add(1)
				}
			}
		})
		wg.Go(func() { // sweeps
			ahead := func() time.Time { return time.Now().Add(2 * day) }
			for {
				select {
				case <-stop:
					return
				default:
				}
				rep, err := sweep.Sweep(b.ctx, sweep.Options{Store: b.store, DB: b.pipe.DB(), Grace: time.Hour, Now: ahead, AllowEmptyRegistry: true})
				if err != nil {
					if b.ctx.Err() == nil {
						t.Errorf("sweep: %v", err)
					}
					return
				}
				sweptDeletes.Add(int64(rep.RemovedByReason[sweep.Orphan]))
			}
		})
		start := time.Now()
		for i := range rounds {
			res, err := b.pipe.Enqueue(b.ctx, "reuse", tenant, strings.NewReader(body), nil)
			if err != nil {
				t.Fatalf("round %d: enqueue: %v", i, err)
			}
			p, err := b.store.Claim(res.Ticket)
			if err == nil {
				err = p.Verify(b.ctx)
				p.Close()
			}
			if err != nil {
				losses.Add(1)
				t.Errorf("round %d: job %d cannot claim its payload: %v", i, res.JobID, err)
			}
			acked <- res
		}
		close(acked)
		close(stop)
		wg.Wait()
		t.Logf("%d rounds in %s: %d losses; the object was deleted %d times by a release and %d times by the sweeper in between",
			rounds, time.Since(start).Round(time.Millisecond), losses.Load(), releasedDeletes.Load(), sweptDeletes.Load())
		if releasedDeletes.Load()+sweptDeletes.Load() == 0 {
			t.Error("no deletion ever came between two check-ins: the race was not exercised")
		}
	})
}

// database is the bundle's job database URL.
func (b *bundle) database(t *testing.T) string {
	t.Helper()
	var file string
	if dbopen.DialectOf(b.pipe.DB()) == dbopen.SQLite {
		if err := b.pipe.DB().QueryRowContext(b.ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
			t.Fatal(err)
		}
		return file
	}
	var schema string
	if err := b.pipe.DB().QueryRowContext(b.ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(os.Getenv(dbtest.EnvPostgresURL))
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// second opens another pipeline on the same job database and store: what
// a separate process (a sweeper, a worker) has.
func (b *bundle) second(t *testing.T, database string) *pipeline.Pipeline {
	t.Helper()
	p, err := pipeline.Open(b.ctx, pipeline.Config{Database: database, Store: b.store, SkipMigrations: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func (b *bundle) enqueueTx(tk *claimcheck.Ticket) (*pipeline.EnqueueResult, error) {
	return b.enqueueTxKind(tk, "paused")
}

func (b *bundle) enqueueTxKind(tk *claimcheck.Ticket, kind string) (*pipeline.EnqueueResult, error) {
	tx, err := b.pipe.DB().BeginTx(b.ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res, err := b.pipe.EnqueueTx(b.ctx, tx, kind, tk, nil)
	if err != nil {
		return nil, err
	}
	return res, tx.Commit()
}

// The result's side of TestSweepClockAheadProducerPaused: a worker whose
// handler succeeded has checked its result in (intent recorded, object
// uploaded) and waits to commit the result's registry row with the job's
// completion, while a sweeper whose clock runs two hours ahead sweeps with
// the shortest grace period. On PostgreSQL the commit waits on a lock
// another connection holds on claimcheck_claim; on SQLite, where one write
// lock covers the whole database (the intent could not be recorded under
// it either), a trigger refuses the result's row until the sweep is over
// (refuseResults), so the worker's completion fails and is retried. The result is kept as
// checking-in, the worker then commits, and the job completes with a
// result that claims and verifies.
func TestSweepClockAheadResultPaused(t *testing.T) {
	stores(t, func(t *testing.T, b *bundle) { pausedResult(t, b, false) })
}

// A worker stalled between its result's upload and its commit for longer
// than the grace period (its intent is backdated 3 h by the database's
// clock; the commit is refused by a trigger on both databases, so no
// transaction holds the intent): the sweep removes the result as an orphan
// with its stale intent;
// the worker's commit then finds the object gone, checks the result in
// again and completes the job, whose result claims and verifies.
func TestSweepResultStalledPastGrace(t *testing.T) {
	stores(t, func(t *testing.T, b *bundle) { pausedResult(t, b, true) })
}

// refuseResults makes the job database refuse results' registry rows (a
// trigger raising an error) until the returned function is called: the
// worker's completion fails and is retried, holding no lock in between.
func refuseResults(t *testing.T, b *bundle) func() {
	t.Helper()
	create := []string{`CREATE TRIGGER hold_results BEFORE INSERT ON claimcheck_claim
		WHEN (NEW.role = 'result') BEGIN SELECT RAISE(ABORT, 'held by the test'); END`}
	drop := `DROP TRIGGER hold_results`
	if dbopen.DialectOf(b.pipe.DB()) == dbopen.Postgres {
		create = []string{`CREATE FUNCTION hold_results() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'held by the test'; END $$`,
			`CREATE TRIGGER hold_results BEFORE INSERT ON claimcheck_claim
			FOR EACH ROW WHEN (NEW.role = 'result') EXECUTE FUNCTION hold_results()`}
		drop = `DROP TRIGGER hold_results ON claimcheck_claim`
	}
	for _, q := range create {
		if _, err := b.pipe.DB().ExecContext(b.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			if _, err := b.pipe.DB().ExecContext(context.WithoutCancel(b.ctx), drop); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

func pausedResult(t *testing.T, b *bundle, stalled bool) {
	database := b.database(t)
	payload := strings.Repeat("a payload whose result is about to be committed. ", 1024)
	result := strings.Repeat("a result its worker is about to commit. ", 4096)
	res, err := b.pipe.Enqueue(b.ctx, "result-paused", tenant, strings.NewReader(payload), nil)
	if err != nil {
		t.Fatal(err)
	}
	sweeper := b.second(t, database)
	var release func()
	if dbopen.DialectOf(b.pipe.DB()) == dbopen.Postgres && !stalled {
		release = holdLock(t, b, database)
	} else {
		release = refuseResults(t, b)
	}
	worked := make(chan error, 1)
	go func() {
		worked <- b.pipe.Work(b.ctx, pipeline.WorkOptions{UntilEmpty: true, Handlers: map[string]claimcheck.Handler{
			"result-paused": claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
				return &claimcheck.Result{Body: strings.NewReader(result), ContentType: "text/plain"}, nil
			}),
		}})
	}()

	// Between upload and commit: the result's object is in the store (the
	// commit cannot have happened: it is held).
	var key string
	for deadline := time.Now().Add(time.Minute); key == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker never checked its result in")
		}
		it := b.store.Bucket().List(&blob.ListOptions{Prefix: claimcheck.PrefixResults})
		for {
			obj, err := it.Next(b.ctx)
			if err != nil {
				break
			}
			if !claimcheck.IsTempKey(obj.Key) && !strings.HasSuffix(obj.Key, ".attrs") {
				key = obj.Key
			}
		}
	}
	want := "kept checking-in"
	if stalled {
		want = "removed orphan"
		r, err := b.pipe.DB().ExecContext(b.ctx, `UPDATE claimcheck_intent SET recorded_ms = recorded_ms - $1 WHERE object_key = $2`, (3 * time.Hour).Milliseconds(), key)
		if n, _ := r.RowsAffected(); err != nil || n != 1 {
			t.Fatalf("backdate the result's intent: %d rows, %v", n, err)
		}
	}
	ahead := func() time.Time { return time.Now().Add(2 * time.Hour) }
	rep, err := sweep.Sweep(b.ctx, sweep.Options{Store: b.store, DB: sweeper.DB(), Grace: time.Hour, Now: ahead})
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, fmt.Sprintf("sweeper clock 2h ahead, worker paused between the result's upload and its commit (intent stale: %v)", stalled), rep)
	d := decisions(rep)
	if d[key] != want || d[res.Ticket.Key] != "kept referenced" {
		t.Errorf("the paused worker's result: %q, want %s; the job's payload: %q, want kept referenced", d[key], want, d[res.Ticket.Key])
	}
	select {
	case err := <-worked:
		t.Fatalf("the worker finished while its commit was held: %v", err)
	default:
	}
	if st := b.state(t, res.JobID); st != "running" {
		t.Errorf("job %d is %s while its commit is held, want running", res.JobID, st)
	}
	release()
	if err := <-worked; err != nil {
		t.Fatalf("work: %v", err)
	}
	j, err := b.pipe.Get(b.ctx, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	rt := j.ResultTicket()
	if j.State != "completed" || j.Attempts != 1 || rt == nil || rt.Key != key {
		t.Fatalf("job %d: %s on attempt %d, result %v; want completed on attempt 1 with its result at the key swept", res.JobID, j.State, j.Attempts, rt)
	}
	p, err := b.store.Claim(rt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Verify(b.ctx); err != nil {
		t.Fatalf("the result of job %d: %v", res.JobID, err)
	}
	var intents int
	if err := b.pipe.DB().QueryRowContext(b.ctx, `SELECT COUNT(*) FROM claimcheck_intent`).Scan(&intents); err != nil || intents != 0 {
		t.Errorf("%d check-in intents left after the commit (%v), want 0", intents, err)
	}
	t.Logf("worker committed its result after the sweep; job %d completed on attempt 1, its %d-byte result claims and verifies", res.JobID, rt.Size)
}

// A producer stalled past the grace period commits while a sweep deletes:
// its intent is stale (backdated 3 h by the database's clock), its
// transaction has removed the intent and written the job but not yet
// committed, and a sweep whose clock runs two hours ahead judges the object
// an orphan (the uncommitted removal is invisible to it). The sweep's
// deletion must wait for the producer's commit and then keep the object,
// now referenced: the producer's transaction holds the object's key lock
// from before it removes the intent. PostgreSQL only: on SQLite one write
// lock serialises the two transactions anyway.
func TestSweepStaleIntentCommitRace(t *testing.T) {
	stores(t, func(t *testing.T, b *bundle) {
		if dbopen.DialectOf(b.pipe.DB()) != dbopen.Postgres {
			t.Skip("SQLite: one write lock serialises the producer's and the sweep's transactions")
		}
		database := b.database(t)
		sweeper := b.second(t, database)
		tk, err := b.pipe.CheckIn(b.ctx, tenant, strings.NewReader(strings.Repeat("stalled past the grace period. ", 2048)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.pipe.DB().ExecContext(b.ctx, `UPDATE claimcheck_intent SET recorded_ms = recorded_ms - $1`, (3 * time.Hour).Milliseconds()); err != nil {
			t.Fatal(err)
		}
		tx, err := b.pipe.DB().BeginTx(b.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		res, err := b.pipe.EnqueueTx(b.ctx, tx, "stalled", tk, nil)
		if err != nil {
			t.Fatal(err)
		}
		type swept struct {
			rep *sweep.Report
			err error
		}
		done := make(chan swept, 1)
		go func() {
			ahead := func() time.Time { return time.Now().Add(2 * time.Hour) }
			rep, err := sweep.Sweep(b.ctx, sweep.Options{Store: b.store, DB: sweeper.DB(), Grace: time.Hour, Now: ahead, AllowEmptyRegistry: true})
			done <- swept{rep, err}
		}()
		// The sweep waits on the producer's transaction (a lock not granted).
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			var waiting int
			if err := sweeper.DB().QueryRowContext(b.ctx, `SELECT COUNT(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting > 0 {
				break
			}
			select {
			case s := <-done:
				logReport(t, "sweep that did not wait", s.rep)
				t.Fatalf("the sweep finished without waiting for the producer's commit: %v", s.err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("the sweep never waited on the producer's transaction")
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		s := <-done
		if s.err != nil {
			t.Fatal(s.err)
		}
		logReport(t, "sweeper clock 2h ahead, producer with a stale intent committing during the sweep", s.rep)
		if got := decisions(s.rep)[tk.Key]; got != "kept referenced" {
			t.Errorf("the producer's object: %q, want kept referenced", got)
		}
		p, err := b.store.Claim(tk)
		if err == nil {
			err = p.Verify(b.ctx)
			p.Close()
		}
		if err != nil {
			t.Fatalf("job %d cannot claim its payload: %v", res.JobID, err)
		}
	})
}

// Check-in intents older than the grace period (by the database's clock)
// are litter when their object was never written: a dry run reports them,
// a sweep removes them. One whose object exists is left to that object's
// decision (here too young to be an orphan, so both stay).
func TestSweepStaleIntents(t *testing.T) {
	databases(t, func(t *testing.T, b *bundle) {
		b.enqueue(t, "queued", "a job, so the registry is not empty")
		written, err := b.pipe.CheckIn(b.ctx, tenant, strings.NewReader("its object was written"), nil)
		if err != nil {
			t.Fatal(err)
		}
		never, err := b.pipe.CheckIn(b.ctx, tenant, strings.NewReader("killed before its object was written"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.store.Bucket().Delete(b.ctx, never.Key); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pipe.DB().ExecContext(b.ctx, `UPDATE claimcheck_intent SET recorded_ms = recorded_ms - $1`, (2 * day).Milliseconds()); err != nil {
			t.Fatal(err)
		}
		intents := func() int {
			var n int
			if err := b.pipe.DB().QueryRowContext(b.ctx, `SELECT COUNT(*) FROM claimcheck_intent`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		want := map[string]string{never.Key: "removed stale-intent", written.Key: "kept too-young"}
		dry := b.sweep(t, sweep.Options{DryRun: true})
		d := decisions(dry)
		for k, w := range want {
			if d[k] != w {
				t.Errorf("dry run: %s: %q, want %q", sweep.RedactKey(k), d[k], w)
			}
		}
		if n := intents(); n != 2 {
			t.Errorf("%d intents after a dry run, want 2", n)
		}
		rep := b.sweep(t, sweep.Options{})
		logReport(t, "stale intents, one of an object never written", rep)
		d = decisions(rep)
		for k, w := range want {
			if d[k] != w {
				t.Errorf("sweep: %s: %q, want %q", sweep.RedactKey(k), d[k], w)
			}
		}
		if n := intents(); n != 1 || !b.exists(t, written.Key) {
			t.Errorf("%d intents after the sweep, want 1 (the written object's, exists: %v)", n, b.exists(t, written.Key))
		}
		if rep.RemovedByReason[sweep.StaleIntent] != 1 {
			t.Errorf("removed by reason %v, want 1 stale-intent", rep.RemovedByReason)
		}
	})
}

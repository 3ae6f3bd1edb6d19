package pipelinetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// WorkTimeout bounds every Work(UntilEmpty) call of the suite: a job that
// never settles fails the test instead of hanging it.
const WorkTimeout = 30 * time.Second

// Registry roles, as the claims registry records them.
const (
	rolePayload = "payload"
	roleResult  = "result"
)

// RunConformance runs the conformance suite. newConfig returns, for one
// test, a Config whose Database is a fresh, empty database no other test
// uses (SQLiteDatabase, PostgresDatabase); the suite sets Store, and
// Retry.MaxAttempts and Retry.Base where a test needs them. Subtests run in
// parallel.
//
// It covers: enqueue and work (offloaded and inline payloads, results read
// back with OpenResult, concurrency); EnqueueTx commit and rollback as a
// transactional outbox; idempotency keys, including racing producers;
// dead-lettering on attempt 1 for permanent failures (missing, corrupt or
// truncated payload, a handler's permanent error); retries with backoff for
// transient failures up to the maximum attempts; dead-letter replay;
// listing; signed tickets; the claims registry's rows; and priorities (a
// priority-1 job enqueued after 50 priority-4 jobs is worked first).
func RunConformance(t *testing.T, newConfig func(t *testing.T) pipeline.Config) {
	t.Helper()
	s := &suite{newConfig: newConfig}
	t.Run("EnqueueAndWork", s.testEnqueueAndWork)
	t.Run("EnqueueTx", s.testEnqueueTx)
	t.Run("IdempotencyKey", s.testIdempotencyKey)
	t.Run("PermanentFailures", s.testPermanentFailures)
	t.Run("TransientFailures", s.testTransientFailures)
	t.Run("Replay", s.testReplay)
	t.Run("List", s.testList)
	t.Run("ListLargeBacklog", s.testListLargeBacklog)
	t.Run("Registry", s.testRegistry)
	t.Run("Priority", s.testPriority)
}

type suite struct {
	newConfig func(t *testing.T) pipeline.Config
}

// bundle is what most tests need: a pipeline on the backend's fresh
// database, over a file:// store in a fresh temporary directory.
type bundle struct {
	ctx   context.Context
	p     *pipeline.Pipeline
	store *claimcheck.Store
	root  string // the bucket's directory
}

type opts struct {
	// store options; SpoolDir is set to a fresh directory.
	store claimcheck.Options
	// maxAttempts, if set, is Config.Retry.MaxAttempts.
	maxAttempts int
	// retryBase is Config.Retry.Base; default 10ms.
	retryBase time.Duration
}

func (s *suite) setup(t *testing.T, o *opts) *bundle {
	t.Helper()
	if o == nil {
		o = &opts{}
	}
	ctx := t.Context()
	dir := t.TempDir()
	b := &bundle{ctx: ctx, root: filepath.Join(dir, "bucket")}

	so := o.store
	so.SpoolDir = filepath.Join(dir, "spool")
	store, err := claimcheck.OpenStore(ctx, "file://"+b.root, &so)
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("store Close: %v", err)
		}
	})
	b.store = store

	cfg := s.newConfig(t)
	cfg.Store = store
	if o.maxAttempts != 0 {
		cfg.Retry.MaxAttempts = o.maxAttempts
	}
	cfg.Retry.Base = cmpOr(o.retryBase, 10*time.Millisecond)
	p, err := pipeline.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pipeline Close: %v", err)
		}
	})
	b.p = p
	return b
}

func cmpOr(d, def time.Duration) time.Duration {
	if d != 0 {
		return d
	}
	return def
}

func (b *bundle) enqueue(t *testing.T, kind, tenant string, data []byte, opts *pipeline.EnqueueOptions) *pipeline.EnqueueResult {
	t.Helper()
	res, err := b.p.Enqueue(b.ctx, kind, tenant, bytes.NewReader(data), opts)
	if err != nil {
		t.Fatalf("Enqueue(%s, %s, %d bytes): %v", kind, tenant, len(data), err)
	}
	return res
}

// objects lists the keys of the objects in the store (temporary files and
// sidecars and the namespace marker excluded).
func (b *bundle) objects(t *testing.T) []string {
	t.Helper()
	var keys []string
	it := b.store.Bucket().List(nil)
	for {
		obj, err := it.Next(b.ctx)
		if errors.Is(err, io.EOF) {
			return keys
		}
		if err != nil {
			t.Fatalf("list the store: %v", err)
		}
		if !claimcheck.IsTempKey(obj.Key) && obj.Key != claimcheck.NamespaceMarkerKey {
			keys = append(keys, obj.Key)
		}
	}
}

// work runs Work until the handled kinds' queues are empty.
func (b *bundle) work(t *testing.T, handlers map[string]claimcheck.Handler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, WorkTimeout)
	defer cancel()
	if err := b.p.Work(ctx, pipeline.WorkOptions{Handlers: handlers, UntilEmpty: true}); err != nil {
		t.Fatalf("Work: %v", err)
	}
}

func (b *bundle) get(t *testing.T, id int64) *pipeline.JobInfo {
	t.Helper()
	j, err := b.p.Get(b.ctx, id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return j
}

func (b *bundle) list(t *testing.T, opts pipeline.ListOptions) []*pipeline.JobInfo {
	t.Helper()
	var jobs []*pipeline.JobInfo
	if err := b.p.List(b.ctx, opts, func(j *pipeline.JobInfo) error {
		jobs = append(jobs, j)
		return nil
	}); err != nil {
		t.Fatalf("List(%+v): %v", opts, err)
	}
	return jobs
}

func reversed(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

func (b *bundle) listIDs(t *testing.T, opts pipeline.ListOptions) []int64 {
	t.Helper()
	var ids []int64
	for _, j := range b.list(t, opts) {
		ids = append(ids, j.ID)
	}
	return ids
}

func (b *bundle) openResult(t *testing.T, id int64) ([]byte, *claimcheck.Ticket) {
	t.Helper()
	rc, rt, err := b.p.OpenResult(b.ctx, id)
	if err != nil {
		t.Fatalf("OpenResult(%d): %v", id, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read result of job %d: %v", id, err)
	}
	return data, rt
}

// objectPath is the file behind an offloaded ticket.
func (b *bundle) objectPath(tk *claimcheck.Ticket) string {
	return filepath.Join(b.root, filepath.FromSlash(tk.Key))
}

// ClaimRow is a row of the claims registry.
type ClaimRow struct {
	JobID  int64
	Role   string
	Key    string
	SHA256 string
	Size   int64
	Tenant string
}

// Claims reads p's claims registry, ordered by job, role and key; with
// jobID > 0, only that job's rows. The SQL is the same on every database.
func Claims(ctx context.Context, p *pipeline.Pipeline, jobID int64) ([]ClaimRow, error) {
	q := `SELECT job_id, role, object_key, sha256, size, tenant FROM claimcheck_claim`
	var args []any
	if jobID > 0 {
		q += ` WHERE job_id = $1`
		args = append(args, jobID)
	}
	rows, err := p.DB().QueryContext(ctx, q+` ORDER BY job_id, role, object_key`, args...)
	if err != nil {
		return nil, fmt.Errorf("query claims registry: %w", err)
	}
	defer rows.Close()
	var out []ClaimRow
	for rows.Next() {
		var r ClaimRow
		if err := rows.Scan(&r.JobID, &r.Role, &r.Key, &r.SHA256, &r.Size, &r.Tenant); err != nil {
			return nil, fmt.Errorf("scan claims registry: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (b *bundle) claims(t *testing.T, jobID int64) []ClaimRow {
	t.Helper()
	rows, err := Claims(b.ctx, b.p, jobID)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.p.DB().QueryRowContext(b.ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func sha(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// bigPayload is n deterministic pseudo-random bytes: above the default
// inline threshold, so offloaded.
func bigPayload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// recorder is a handler that records every call and delegates to fn.
type recorder struct {
	mu       sync.Mutex
	calls    []call
	fn       func(ctx context.Context, job *claimcheck.Job, data []byte) (*claimcheck.Result, error)
	openFail error // set when opening the payload failed inside the handler
}

type call struct {
	jobID   string
	kind    string
	tenant  string
	attempt int
	data    []byte
	start   time.Time
	end     time.Time
}

func (r *recorder) Handle(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
	start := time.Now()
	rc, err := job.Payload.Open(ctx)
	if err != nil {
		r.mu.Lock()
		r.openFail = err
		r.mu.Unlock()
		return nil, err
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	var res *claimcheck.Result
	if r.fn != nil {
		res, err = r.fn(ctx, job, data)
	}
	r.mu.Lock()
	r.calls = append(r.calls, call{job.ID, job.Kind, job.Tenant, job.Attempt, data, start, time.Now()})
	r.mu.Unlock()
	return res, err
}

func (r *recorder) snapshot() ([]call, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls), r.openFail
}

func (r *recorder) attempts() []int {
	calls, _ := r.snapshot()
	var a []int
	for _, c := range calls {
		a = append(a, c.attempt)
	}
	return a
}

// wantJob checks the listing fields tests care most about.
func wantJob(t *testing.T, j *pipeline.JobInfo, state string, attempts int, dead bool, reason string) {
	t.Helper()
	if j.State != state || j.Attempts != attempts || j.Dead != dead || j.Reason != reason {
		t.Fatalf("job %d: state=%s attempts=%d dead=%v reason=%q (error %q); want state=%s attempts=%d dead=%v reason=%q",
			j.ID, j.State, j.Attempts, j.Dead, j.Reason, j.Error, state, attempts, dead, reason)
	}
}

func (s *suite) testEnqueueAndWork(t *testing.T) {
	t.Parallel()

	t.Run("Offloaded", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		payload := bigPayload(1, 200<<10)
		res := b.enqueue(t, "pdf-info", "acme", payload, &pipeline.EnqueueOptions{CheckIn: claimcheck.CheckInOptions{ContentType: "application/pdf"}})
		if res.Duplicate || res.Ticket.IsInline() {
			t.Fatalf("Enqueue: duplicate=%v inline=%v, want an offloaded new job", res.Duplicate, res.Ticket.IsInline())
		}
		if res.TicketBytes > claimcheck.MaxTicketBytes {
			t.Fatalf("ticket is %d bytes, budget %d", res.TicketBytes, claimcheck.MaxTicketBytes)
		}
		if !strings.HasPrefix(res.Ticket.Key, claimcheck.PrefixPayloads+"acme/") || res.Ticket.SHA256 != sha(payload) || res.Ticket.Size != int64(len(payload)) {
			t.Fatalf("ticket = key %q sha256 %s size %d; want under payloads/acme/, sha256 %s, size %d",
				res.Ticket.Key, res.Ticket.SHA256, res.Ticket.Size, sha(payload), len(payload))
		}

		// Before work: available, not yet attempted; the listing reports the
		// ticket's size as encoded, whatever the database's JSON storage.
		j := b.get(t, res.JobID)
		wantJob(t, j, "available", 0, false, "")
		if j.TicketBytes != res.TicketBytes {
			t.Fatalf("listed ticket is %d bytes, enqueued %d", j.TicketBytes, res.TicketBytes)
		}

		result := append([]byte("checked:"), payload...) // > inline threshold: offloaded
		h := &recorder{fn: func(_ context.Context, _ *claimcheck.Job, data []byte) (*claimcheck.Result, error) {
			return &claimcheck.Result{Body: bytes.NewReader(append([]byte("checked:"), data...)), ContentType: "application/octet-stream"}, nil
		}}
		b.work(t, map[string]claimcheck.Handler{"pdf-info": h})

		calls, openErr := h.snapshot()
		if openErr != nil {
			t.Fatalf("handler could not open its payload: %v", openErr)
		}
		if len(calls) != 1 {
			t.Fatalf("handler called %d times, want 1", len(calls))
		}
		c := calls[0]
		if !bytes.Equal(c.data, payload) {
			t.Fatalf("handler saw %d bytes (sha256 %s), want the payload's %d bytes (sha256 %s)", len(c.data), sha(c.data), len(payload), sha(payload))
		}
		if c.jobID != strconv.FormatInt(res.JobID, 10) || c.kind != "pdf-info" || c.tenant != "acme" || c.attempt != 1 {
			t.Fatalf("handler saw job id %s kind %s tenant %s attempt %d, want id %d kind pdf-info tenant acme attempt 1", c.jobID, c.kind, c.tenant, c.attempt, res.JobID)
		}

		j = b.get(t, res.JobID)
		wantJob(t, j, "completed", 1, false, "")
		if j.Kind != "pdf-info" || j.Tenant != "acme" || j.Inline || j.Size != int64(len(payload)) || j.SHA256 != sha(payload)[:12] || j.TicketBytes != res.TicketBytes {
			t.Fatalf("job info = %+v", j)
		}
		if !j.HasResult || j.ResultTicket() == nil {
			t.Fatalf("completed job has no result ticket")
		}
		got, rt := b.openResult(t, res.JobID)
		if !bytes.Equal(got, result) {
			t.Fatalf("OpenResult: %d bytes (sha256 %s), want %d bytes (sha256 %s)", len(got), sha(got), len(result), sha(result))
		}
		if rt.IsInline() || !strings.HasPrefix(rt.Key, claimcheck.PrefixResults+"acme/") || rt.SHA256 != sha(result) || rt.Size != int64(len(result)) {
			t.Fatalf("result ticket = key %q sha256 %s size %d inline %v", rt.Key, rt.SHA256, rt.Size, rt.IsInline())
		}

		want := []ClaimRow{
			{res.JobID, rolePayload, res.Ticket.Key, sha(payload), int64(len(payload)), "acme"},
			{res.JobID, roleResult, rt.Key, sha(result), int64(len(result)), "acme"},
		}
		if got := b.claims(t, 0); !slices.Equal(got, want) {
			t.Fatalf("claims registry =\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("InlinePayload", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		payload := []byte("tiny payload")
		res := b.enqueue(t, "shout", "acme", payload, nil)
		if !res.Ticket.IsInline() {
			t.Fatalf("a %d-byte payload was offloaded", len(payload))
		}
		h := &recorder{fn: func(_ context.Context, _ *claimcheck.Job, data []byte) (*claimcheck.Result, error) {
			return &claimcheck.Result{Body: bytes.NewReader(bytes.ToUpper(data))}, nil
		}}
		b.work(t, map[string]claimcheck.Handler{"shout": h})

		calls, _ := h.snapshot()
		if len(calls) != 1 || !bytes.Equal(calls[0].data, payload) {
			t.Fatalf("handler calls = %d, want one with %q", len(calls), payload)
		}
		j := b.get(t, res.JobID)
		wantJob(t, j, "completed", 1, false, "")
		if !j.Inline || !j.HasResult || j.TicketBytes != res.TicketBytes {
			t.Fatalf("job inline=%v has_result=%v ticket %d bytes; want inline, a result, %d bytes", j.Inline, j.HasResult, j.TicketBytes, res.TicketBytes)
		}
		got, rt := b.openResult(t, res.JobID)
		if string(got) != "TINY PAYLOAD" || !rt.IsInline() {
			t.Fatalf("OpenResult = %q (inline %v), want inline %q", got, rt.IsInline(), "TINY PAYLOAD")
		}
		if rows := b.claims(t, 0); len(rows) != 0 {
			t.Fatalf("inline payload and result registered objects: %+v", rows)
		}
	})

	t.Run("NoResult", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, &opts{store: claimcheck.Options{AlwaysOffload: true}})
		res := b.enqueue(t, "noop", "acme", []byte("x"), nil)
		h := &recorder{}
		b.work(t, map[string]claimcheck.Handler{"noop": h})
		j := b.get(t, res.JobID)
		wantJob(t, j, "completed", 1, false, "")
		if j.HasResult || j.ResultTicket() != nil {
			t.Fatalf("job without a result reports one")
		}
		if _, _, err := b.p.OpenResult(b.ctx, res.JobID); !errors.Is(err, pipeline.ErrNoResult) {
			t.Fatalf("OpenResult of a job without result: %v, want ErrNoResult", err)
		}
		want := []ClaimRow{{res.JobID, rolePayload, res.Ticket.Key, sha([]byte("x")), 1, "acme"}}
		if got := b.claims(t, 0); !slices.Equal(got, want) {
			t.Fatalf("claims registry = %+v, want %+v", got, want)
		}
	})

	t.Run("SignedTickets", func(t *testing.T) {
		t.Parallel()
		// The database may store job arguments in its own JSON form
		// (PostgreSQL's jsonb reorders keys and adds spaces); a signed ticket
		// must still verify after the round trip.
		b := s.setup(t, &opts{store: claimcheck.Options{Secret: bytes.Repeat([]byte{7}, 32), SignTickets: true}})
		small := b.enqueue(t, "signed", "acme", []byte("inline & <signed>"), nil)
		big := b.enqueue(t, "signed", "acme", bigPayload(2, 100<<10), nil)
		h := &recorder{}
		b.work(t, map[string]claimcheck.Handler{"signed": h})
		wantJob(t, b.get(t, small.JobID), "completed", 1, false, "")
		wantJob(t, b.get(t, big.JobID), "completed", 1, false, "")
		if j := b.get(t, small.JobID); j.TicketBytes != small.TicketBytes {
			t.Fatalf("listed ticket is %d bytes, enqueued %d", j.TicketBytes, small.TicketBytes)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, &opts{store: claimcheck.Options{AlwaysOffload: true}})
		const n = 12
		ids := make(map[int64][]byte)
		for i := range n {
			data := fmt.Appendf(nil, "payload %d", i)
			ids[b.enqueue(t, "echo", "acme", data, nil).JobID] = data
		}
		h := &recorder{fn: func(_ context.Context, _ *claimcheck.Job, data []byte) (*claimcheck.Result, error) {
			return &claimcheck.Result{Body: bytes.NewReader(append([]byte("re: "), data...))}, nil
		}}
		ctx, cancel := context.WithTimeout(b.ctx, WorkTimeout)
		defer cancel()
		if err := b.p.Work(ctx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{"echo": h}, Concurrency: 4, UntilEmpty: true}); err != nil {
			t.Fatalf("Work: %v", err)
		}
		if calls, _ := h.snapshot(); len(calls) != n {
			t.Fatalf("handler called %d times, want %d", len(calls), n)
		}
		for id, data := range ids {
			wantJob(t, b.get(t, id), "completed", 1, false, "")
			got, _ := b.openResult(t, id)
			if want := "re: " + string(data); string(got) != want {
				t.Fatalf("job %d result %q, want %q", id, got, want)
			}
			if rows := b.claims(t, id); len(rows) != 2 || rows[0].Role != rolePayload || rows[1].Role != roleResult {
				t.Fatalf("job %d registry rows = %+v, want payload and result", id, rows)
			}
		}
	})
}

func (s *suite) testEnqueueTx(t *testing.T) {
	t.Parallel()

	run := func(t *testing.T, commit bool) {
		b := s.setup(t, &opts{store: claimcheck.Options{AlwaysOffload: true}})
		db := b.p.DB()
		if _, err := db.ExecContext(b.ctx, `CREATE TABLE conformance_orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		payload := []byte("order 42 label")
		tk, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(payload), nil)
		if err != nil {
			t.Fatal(err)
		}

		tx, err := db.BeginTx(b.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(b.ctx, `INSERT INTO conformance_orders (id, note) VALUES (42, 'label')`); err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
		res, err := b.p.EnqueueTx(b.ctx, tx, "labels", tk, nil)
		if err != nil {
			_ = tx.Rollback()
			t.Fatalf("EnqueueTx: %v", err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}

		// The object is written before the transaction either way: after a
		// rollback it is an orphan, never a dangling ticket.
		if ok, err := b.store.Bucket().Exists(b.ctx, tk.Key); err != nil || !ok {
			t.Fatalf("payload object exists=%v err=%v, want it to exist", ok, err)
		}
		jobs := b.list(t, pipeline.ListOptions{})
		orders := b.count(t, `SELECT count(*) FROM conformance_orders`)
		claims := b.claims(t, 0)
		if !commit {
			if len(jobs) != 0 || orders != 0 || len(claims) != 0 {
				t.Fatalf("after rollback: %d jobs, %d orders, registry %+v; want none", len(jobs), orders, claims)
			}
			if _, err := b.p.Get(b.ctx, res.JobID); !errors.Is(err, pipeline.ErrJobNotFound) {
				t.Fatalf("Get(rolled back job %d): %v, want ErrJobNotFound", res.JobID, err)
			}
			return
		}
		if len(jobs) != 1 || jobs[0].ID != res.JobID || jobs[0].Kind != "labels" || jobs[0].State != "available" {
			t.Fatalf("after commit: jobs %+v, want job %d of kind labels, available", jobs, res.JobID)
		}
		if orders != 1 {
			t.Fatalf("after commit: %d orders, want 1", orders)
		}
		want := []ClaimRow{{res.JobID, rolePayload, tk.Key, sha(payload), int64(len(payload)), "acme"}}
		if !slices.Equal(claims, want) {
			t.Fatalf("after commit: registry %+v, want %+v", claims, want)
		}
		h := &recorder{}
		b.work(t, map[string]claimcheck.Handler{"labels": h})
		if calls, _ := h.snapshot(); len(calls) != 1 || !bytes.Equal(calls[0].data, payload) {
			t.Fatalf("handler calls %d, want one with %q", len(calls), payload)
		}
		wantJob(t, b.get(t, res.JobID), "completed", 1, false, "")
	}

	t.Run("Rollback", func(t *testing.T) { t.Parallel(); run(t, false) })
	t.Run("Commit", func(t *testing.T) { t.Parallel(); run(t, true) })
}

func (s *suite) testIdempotencyKey(t *testing.T) {
	t.Parallel()

	t.Run("SameKindTenantKey", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, &opts{store: claimcheck.Options{AlwaysOffload: true}})
		o := &pipeline.EnqueueOptions{IdempotencyKey: "order-42"}
		first := b.enqueue(t, "labels", "acme", []byte("first"), o)
		second := b.enqueue(t, "labels", "acme", []byte("first"), o)
		if first.Duplicate {
			t.Fatalf("first enqueue reported a duplicate")
		}
		if !second.Duplicate || second.JobID != first.JobID {
			t.Fatalf("second enqueue: job %d duplicate %v; want job %d duplicate", second.JobID, second.Duplicate, first.JobID)
		}
		if second.Ticket.SHA256 != sha([]byte("first")) || second.TicketBytes != first.TicketBytes {
			t.Fatalf("duplicate returned ticket sha256 %s (%d bytes), want the first job's (%d bytes)", second.Ticket.SHA256, second.TicketBytes, first.TicketBytes)
		}
		// Other bytes under the same key: an error of its own, naming both
		// digests' prefixes, with nothing stored.
		_, err := b.p.Enqueue(b.ctx, "labels", "acme", strings.NewReader("second"), o)
		if !errors.Is(err, pipeline.ErrIdempotencyConflict) {
			t.Fatalf("other bytes under the same key: %v, want ErrIdempotencyConflict", err)
		}
		for _, want := range []string{pipeline.ReasonIdempotencyConflict, sha([]byte("first"))[:12], sha([]byte("second"))[:12]} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("conflict error %q does not name %s", err, want)
			}
		}
		if ids := b.listIDs(t, pipeline.ListOptions{}); !slices.Equal(ids, []int64{first.JobID}) {
			t.Fatalf("jobs %v, want only %d", ids, first.JobID)
		}
		if rows := b.claims(t, 0); len(rows) != 1 || rows[0].Key != first.Ticket.Key {
			t.Fatalf("registry %+v, want the first job's payload row only", rows)
		}
		if keys := b.objects(t); len(keys) != 1 || keys[0] != first.Ticket.Key {
			t.Fatalf("objects %v, want only the first job's", keys)
		}
	})

	// Eight producers, one idempotency key, eight different payloads: one
	// job, seven conflicts, one object.
	t.Run("RacingConflicts", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, &opts{store: claimcheck.Options{AlwaysOffload: true}})
		const n = 8
		results := make([]*pipeline.EnqueueResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				body := bytes.Repeat([]byte(fmt.Sprintf("file %d ", i)), 20000)
				results[i], errs[i] = b.p.Enqueue(b.ctx, "labels", "acme", bytes.NewReader(body), &pipeline.EnqueueOptions{IdempotencyKey: "order-8"})
			})
		}
		wg.Wait()
		jobs, conflicts := 0, 0
		var winner *pipeline.EnqueueResult
		for i := range n {
			switch {
			case errs[i] == nil && !results[i].Duplicate:
				jobs++
				winner = results[i]
			case errors.Is(errs[i], pipeline.ErrIdempotencyConflict):
				conflicts++
			default:
				t.Errorf("producer %d: result %+v, error %v", i, results[i], errs[i])
			}
		}
		keys := b.objects(t)
		t.Logf("8 producers, one key, 8 files: %d job, %d idempotency-conflict, %d object", jobs, conflicts, len(keys))
		if jobs != 1 || conflicts != n-1 {
			t.Fatalf("%d jobs and %d conflicts, want 1 and %d", jobs, conflicts, n-1)
		}
		if len(keys) != 1 || keys[0] != winner.Ticket.Key {
			t.Fatalf("objects %v, want only the job's %s", keys, winner.Ticket.Key)
		}
		if ids := b.listIDs(t, pipeline.ListOptions{}); len(ids) != 1 {
			t.Fatalf("jobs %v, want 1", ids)
		}
	})

	t.Run("RacingProducers", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		const n = 8
		results := make([]*pipeline.EnqueueResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = b.p.Enqueue(b.ctx, "labels", "acme", strings.NewReader("same order"), &pipeline.EnqueueOptions{IdempotencyKey: "order-7"})
			})
		}
		wg.Wait()
		fresh := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("producer %d: %v", i, errs[i])
			}
			if !results[i].Duplicate {
				fresh++
			}
			if results[i].JobID != results[0].JobID {
				t.Fatalf("producers got jobs %d and %d, want one job", results[0].JobID, results[i].JobID)
			}
		}
		if fresh != 1 {
			t.Fatalf("%d producers created the job, want exactly 1", fresh)
		}
		if ids := b.listIDs(t, pipeline.ListOptions{}); len(ids) != 1 {
			t.Fatalf("jobs %v, want 1", ids)
		}
	})

	// An inline job's Enqueue (on PostgreSQL through River's pgx driver)
	// and EnqueueTx (the caller's database/sql transaction) share one
	// idempotency key, whichever comes first.
	t.Run("EnqueueAndEnqueueTx", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		enqueueTx := func(key string, payload []byte) (*pipeline.EnqueueResult, error) {
			tk, err := b.p.CheckIn(b.ctx, "acme", bytes.NewReader(payload), nil)
			if err != nil {
				t.Fatal(err)
			}
			tx, err := b.p.DB().BeginTx(b.ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			res, err := b.p.EnqueueTx(b.ctx, tx, "labels", tk, &pipeline.EnqueueOptions{IdempotencyKey: key})
			if err != nil {
				return nil, err
			}
			return res, tx.Commit()
		}
		first := b.enqueue(t, "labels", "acme", []byte("inline a"), &pipeline.EnqueueOptions{IdempotencyKey: "order-a"})
		again, err := enqueueTx("order-a", []byte("inline a"))
		if err != nil || !again.Duplicate || again.JobID != first.JobID || again.TicketBytes != first.TicketBytes {
			t.Fatalf("EnqueueTx after Enqueue, same key and bytes: %+v, %v; want job %d as a duplicate of %d ticket bytes", again, err, first.JobID, first.TicketBytes)
		}
		if _, err := enqueueTx("order-a", []byte("inline b")); !errors.Is(err, pipeline.ErrIdempotencyConflict) {
			t.Fatalf("EnqueueTx after Enqueue, other bytes: %v, want ErrIdempotencyConflict", err)
		}
		firstTx, err := enqueueTx("order-b", []byte("inline c"))
		if err != nil || firstTx.Duplicate {
			t.Fatalf("EnqueueTx: %+v, %v", firstTx, err)
		}
		if again := b.enqueue(t, "labels", "acme", []byte("inline c"), &pipeline.EnqueueOptions{IdempotencyKey: "order-b"}); !again.Duplicate || again.JobID != firstTx.JobID {
			t.Fatalf("Enqueue after EnqueueTx, same key and bytes: job %d duplicate %v, want job %d as a duplicate", again.JobID, again.Duplicate, firstTx.JobID)
		}
		if _, err := b.p.Enqueue(b.ctx, "labels", "acme", strings.NewReader("inline d"), &pipeline.EnqueueOptions{IdempotencyKey: "order-b"}); !errors.Is(err, pipeline.ErrIdempotencyConflict) {
			t.Fatalf("Enqueue after EnqueueTx, other bytes: %v, want ErrIdempotencyConflict", err)
		}
		if ids := b.listIDs(t, pipeline.ListOptions{}); !slices.Equal(ids, []int64{first.JobID, firstTx.JobID}) && !slices.Equal(ids, []int64{firstTx.JobID, first.JobID}) {
			t.Fatalf("jobs %v, want %d and %d", ids, first.JobID, firstTx.JobID)
		}
	})

	t.Run("OtherTenant", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		o := &pipeline.EnqueueOptions{IdempotencyKey: "order-42"}
		a := b.enqueue(t, "labels", "acme", []byte("x"), o)
		other := b.enqueue(t, "labels", "other", []byte("x"), o)
		if a.Duplicate || other.Duplicate || a.JobID == other.JobID {
			t.Fatalf("jobs %d (dup %v) and %d (dup %v), want two new jobs", a.JobID, a.Duplicate, other.JobID, other.Duplicate)
		}
		if ids := b.listIDs(t, pipeline.ListOptions{}); len(ids) != 2 {
			t.Fatalf("jobs %v, want 2", ids)
		}
	})

	t.Run("OtherKind", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		o := &pipeline.EnqueueOptions{IdempotencyKey: "order-42"}
		a := b.enqueue(t, "labels", "acme", []byte("x"), o)
		other := b.enqueue(t, "invoices", "acme", []byte("x"), o)
		if a.Duplicate || other.Duplicate || a.JobID == other.JobID {
			t.Fatalf("jobs %d (dup %v) and %d (dup %v), want two new jobs", a.JobID, a.Duplicate, other.JobID, other.Duplicate)
		}
	})

	t.Run("EmptyKey", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		a := b.enqueue(t, "labels", "acme", []byte("x"), nil)
		other := b.enqueue(t, "labels", "acme", []byte("x"), &pipeline.EnqueueOptions{})
		if a.Duplicate || other.Duplicate || a.JobID == other.JobID {
			t.Fatalf("jobs %d (dup %v) and %d (dup %v), want two new jobs", a.JobID, a.Duplicate, other.JobID, other.Duplicate)
		}
		if ids := b.listIDs(t, pipeline.ListOptions{}); len(ids) != 2 {
			t.Fatalf("jobs %v, want 2", ids)
		}
	})

	t.Run("DeadJobDoesNotCount", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		o := &pipeline.EnqueueOptions{IdempotencyKey: "order-42"}
		first := b.enqueue(t, "labels", "acme", []byte("x"), o)
		b.work(t, map[string]claimcheck.Handler{"labels": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return nil, claimcheck.Permanent(errors.New("bad label"))
		})})
		wantJob(t, b.get(t, first.JobID), "cancelled", 1, true, claimcheck.ReasonHandler)
		again := b.enqueue(t, "labels", "acme", []byte("x"), o)
		if again.Duplicate || again.JobID == first.JobID {
			t.Fatalf("enqueue after the first job died: job %d duplicate %v, want a new job", again.JobID, again.Duplicate)
		}
	})

	t.Run("TooLong", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		_, err := b.p.Enqueue(b.ctx, "labels", "acme", strings.NewReader("x"), &pipeline.EnqueueOptions{IdempotencyKey: strings.Repeat("k", pipeline.MaxIdempotencyKeyLen+1)})
		if !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Fatalf("Enqueue with a %d-byte key: %v, want ErrTicketInvalid", pipeline.MaxIdempotencyKeyLen+1, err)
		}
		b.enqueue(t, "labels", "acme", []byte("x"), &pipeline.EnqueueOptions{IdempotencyKey: strings.Repeat("k", pipeline.MaxIdempotencyKeyLen)})
	})
}

// Permanent failures dead-letter on the first attempt, with a reason, and
// the handler never sees unverified bytes.
func (s *suite) testPermanentFailures(t *testing.T) {
	t.Parallel()

	// Offloaded, with the default MaxAttempts (5): a dead letter on attempt 1
	// can only come from cancellation, not exhausted retries.
	offloaded := &opts{store: claimcheck.Options{AlwaysOffload: true}}

	deadOnFirst := func(t *testing.T, b *bundle, id int64, h *recorder, reason string, handlerCalls int) *pipeline.JobInfo {
		t.Helper()
		b.work(t, map[string]claimcheck.Handler{"docs": h})
		j := b.get(t, id)
		wantJob(t, j, "cancelled", 1, true, reason)
		if calls, openErr := h.snapshot(); len(calls) != handlerCalls || openErr != nil {
			t.Fatalf("handler called %d times (open error %v), want %d", len(calls), openErr, handlerCalls)
		}
		if ids := b.listIDs(t, pipeline.ListOptions{State: pipeline.StateDead}); !slices.Equal(ids, []int64{id}) {
			t.Fatalf("dead letters %v, want [%d]", ids, id)
		}
		return j
	}

	t.Run("PayloadMissing", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, offloaded)
		res := b.enqueue(t, "docs", "acme", []byte("will vanish"), nil)
		if err := b.store.Bucket().Delete(b.ctx, res.Ticket.Key); err != nil {
			t.Fatal(err)
		}
		j := deadOnFirst(t, b, res.JobID, &recorder{}, claimcheck.ReasonPayloadMissing, 0)
		if strings.Contains(j.Error, res.Ticket.Key) {
			t.Fatalf("recorded error reveals the object key: %q", j.Error)
		}
	})

	t.Run("PayloadCorrupt", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		payload := bigPayload(3, 150<<10)
		res := b.enqueue(t, "docs", "acme", payload, nil)
		path := b.objectPath(res.Ticket)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read object file: %v", err)
		}
		if !bytes.Equal(data, payload) {
			t.Fatalf("object file does not hold the payload")
		}
		data[len(data)/2] ^= 0x01
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		j := deadOnFirst(t, b, res.JobID, &recorder{}, claimcheck.ReasonPayloadCorrupt, 0)
		if strings.Contains(j.Error, res.Ticket.Key) {
			t.Fatalf("recorded error reveals the object key: %q", j.Error)
		}
	})

	t.Run("PayloadTruncated", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, offloaded)
		res := b.enqueue(t, "docs", "acme", []byte("0123456789"), nil)
		if err := os.Truncate(b.objectPath(res.Ticket), 5); err != nil {
			t.Fatal(err)
		}
		deadOnFirst(t, b, res.JobID, &recorder{}, claimcheck.ReasonPayloadCorrupt, 0)
	})

	t.Run("HandlerPermanent", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, offloaded)
		res := b.enqueue(t, "docs", "acme", []byte("unprocessable"), nil)
		h := &recorder{fn: func(context.Context, *claimcheck.Job, []byte) (*claimcheck.Result, error) {
			return nil, claimcheck.Permanent(errors.New("not a PDF"))
		}}
		j := deadOnFirst(t, b, res.JobID, h, claimcheck.ReasonHandler, 1)
		if !strings.Contains(j.Error, "not a PDF") {
			t.Fatalf("recorded error %q lacks the handler's message", j.Error)
		}
		if j.HasResult {
			t.Fatalf("dead job has a result")
		}
	})
}

// Transient failures are retried with backoff, then dead-lettered.
func (s *suite) testTransientFailures(t *testing.T) {
	t.Parallel()

	t.Run("ExhaustsMaxAttempts", func(t *testing.T) {
		t.Parallel()
		const base = 150 * time.Millisecond
		b := s.setup(t, &opts{maxAttempts: 3, retryBase: base})
		res := b.enqueue(t, "flaky", "acme", []byte("payload"), nil)
		h := &recorder{fn: func(context.Context, *claimcheck.Job, []byte) (*claimcheck.Result, error) {
			return nil, errors.New("upstream timed out")
		}}
		b.work(t, map[string]claimcheck.Handler{"flaky": h})
		j := b.get(t, res.JobID)
		wantJob(t, j, "discarded", 3, true, claimcheck.ReasonTransient)
		if j.MaxAttempts != 3 {
			t.Fatalf("max attempts %d, want 3", j.MaxAttempts)
		}
		if got := h.attempts(); !slices.Equal(got, []int{1, 2, 3}) {
			t.Fatalf("handler attempts %v, want [1 2 3]", got)
		}
		if !strings.Contains(j.Error, "upstream timed out") {
			t.Fatalf("recorded error %q lacks the handler's message", j.Error)
		}
		if ids := b.listIDs(t, pipeline.ListOptions{State: pipeline.StateDead}); !slices.Equal(ids, []int64{res.JobID}) {
			t.Fatalf("dead letters %v, want [%d]", ids, res.JobID)
		}
		// Backoff: the retry after attempt n waits at least base·2^(n-1).
		// (A few milliseconds of slack for the database's clock.)
		calls, _ := h.snapshot()
		for i := 1; i < len(calls); i++ {
			gap := calls[i].start.Sub(calls[i-1].end)
			if want := base << (i - 1); gap < want-10*time.Millisecond {
				t.Errorf("attempt %d started %v after attempt %d failed, want a backoff of at least %v", i+1, gap, i, want)
			}
		}
	})

	t.Run("PerJobMaxAttempts", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, &opts{maxAttempts: 5})
		res := b.enqueue(t, "flaky", "acme", []byte("payload"), &pipeline.EnqueueOptions{MaxAttempts: 2})
		h := &recorder{fn: func(context.Context, *claimcheck.Job, []byte) (*claimcheck.Result, error) {
			return nil, errors.New("still down")
		}}
		b.work(t, map[string]claimcheck.Handler{"flaky": h})
		wantJob(t, b.get(t, res.JobID), "discarded", 2, true, claimcheck.ReasonTransient)
		if got := h.attempts(); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("handler attempts %v, want [1 2]", got)
		}
	})

	t.Run("FailsOnceThenSucceeds", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, &opts{maxAttempts: 3})
		res := b.enqueue(t, "flaky", "acme", []byte("payload"), nil)
		h := &recorder{fn: func(_ context.Context, job *claimcheck.Job, _ []byte) (*claimcheck.Result, error) {
			if job.Attempt == 1 {
				return nil, errors.New("throttled")
			}
			return &claimcheck.Result{Body: strings.NewReader("ok")}, nil
		}}
		b.work(t, map[string]claimcheck.Handler{"flaky": h})
		j := b.get(t, res.JobID)
		wantJob(t, j, "completed", 2, false, "")
		if got := h.attempts(); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("handler attempts %v, want [1 2]", got)
		}
		if got, _ := b.openResult(t, res.JobID); string(got) != "ok" {
			t.Fatalf("result %q, want %q", got, "ok")
		}
	})
}

func (s *suite) testReplay(t *testing.T) {
	t.Parallel()

	t.Run("MissingPayloadRestored", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, &opts{store: claimcheck.Options{AlwaysOffload: true}})
		payload := []byte("lost and found")
		res := b.enqueue(t, "docs", "acme", payload, nil)
		if err := b.store.Bucket().Delete(b.ctx, res.Ticket.Key); err != nil {
			t.Fatal(err)
		}
		h := &recorder{fn: func(_ context.Context, _ *claimcheck.Job, data []byte) (*claimcheck.Result, error) {
			return &claimcheck.Result{Body: bytes.NewReader(bytes.ToUpper(data))}, nil
		}}
		handlers := map[string]claimcheck.Handler{"docs": h}
		b.work(t, handlers)
		wantJob(t, b.get(t, res.JobID), "cancelled", 1, true, claimcheck.ReasonPayloadMissing)

		// Restore the object: the same bytes land on the same key.
		tk, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(payload), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Key != res.Ticket.Key {
			t.Fatalf("re-check-in landed on another key")
		}
		j, err := b.p.Replay(b.ctx, res.JobID)
		if err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if j.ID != res.JobID || j.State != "available" || j.Dead {
			t.Fatalf("Replay returned job %d state %s dead %v, want %d available", j.ID, j.State, j.Dead, res.JobID)
		}
		b.work(t, handlers)
		j = b.get(t, res.JobID)
		wantJob(t, j, "completed", 2, false, "")
		if calls, _ := h.snapshot(); len(calls) != 1 || calls[0].attempt != 2 || !bytes.Equal(calls[0].data, payload) {
			t.Fatalf("handler calls %d, want one on attempt 2 with the payload", len(calls))
		}
		if got, _ := b.openResult(t, res.JobID); string(got) != "LOST AND FOUND" {
			t.Fatalf("result %q", got)
		}
		if ids := b.listIDs(t, pipeline.ListOptions{State: pipeline.StateDead}); len(ids) != 0 {
			t.Fatalf("dead letters after replay: %v", ids)
		}

		// A completed job is not dead.
		if _, err := b.p.Replay(b.ctx, res.JobID); !errors.Is(err, pipeline.ErrNotDead) {
			t.Fatalf("Replay(completed): %v, want ErrNotDead", err)
		}
	})

	t.Run("DiscardedJob", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, &opts{maxAttempts: 2})
		res := b.enqueue(t, "flaky", "acme", []byte("payload"), nil)
		var mu sync.Mutex
		down := true
		h := &recorder{fn: func(context.Context, *claimcheck.Job, []byte) (*claimcheck.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			if down {
				return nil, errors.New("down")
			}
			return nil, nil
		}}
		handlers := map[string]claimcheck.Handler{"flaky": h}
		b.work(t, handlers)
		wantJob(t, b.get(t, res.JobID), "discarded", 2, true, claimcheck.ReasonTransient)
		mu.Lock()
		down = false
		mu.Unlock()
		if _, err := b.p.Replay(b.ctx, res.JobID); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		b.work(t, handlers)
		wantJob(t, b.get(t, res.JobID), "completed", 3, false, "")
		if got := h.attempts(); !slices.Equal(got, []int{1, 2, 3}) {
			t.Fatalf("handler attempts %v, want [1 2 3]", got)
		}
	})

	t.Run("NotDead", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		res := b.enqueue(t, "docs", "acme", []byte("waiting"), nil)
		if _, err := b.p.Replay(b.ctx, res.JobID); !errors.Is(err, pipeline.ErrNotDead) {
			t.Fatalf("Replay(available): %v, want ErrNotDead", err)
		}
		wantJob(t, b.get(t, res.JobID), "available", 0, false, "")
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, nil)
		if _, err := b.p.Get(b.ctx, 12345); !errors.Is(err, pipeline.ErrJobNotFound) {
			t.Fatalf("Get(unknown): %v, want ErrJobNotFound", err)
		}
		if _, err := b.p.Replay(b.ctx, 12345); !errors.Is(err, pipeline.ErrJobNotFound) {
			t.Fatalf("Replay(unknown): %v, want ErrJobNotFound", err)
		}
		if _, _, err := b.p.OpenResult(b.ctx, 12345); !errors.Is(err, pipeline.ErrJobNotFound) {
			t.Fatalf("OpenResult(unknown): %v, want ErrJobNotFound", err)
		}
	})
}

func (s *suite) testList(t *testing.T) {
	t.Parallel()
	b := s.setup(t, nil)

	var alpha []int64
	for i := range 5 {
		alpha = append(alpha, b.enqueue(t, "alpha", "acme", fmt.Appendf(nil, "a%d", i), nil).JobID)
	}
	beta := b.enqueue(t, "beta", "acme", []byte("b0"), nil).JobID

	// Permanently fail a1 and a3, complete the rest; beta stays available.
	b.work(t, map[string]claimcheck.Handler{"alpha": claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		rc, err := job.Payload.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		data, err := io.ReadAll(rc)
		if err != nil {
			return nil, err
		}
		if string(data) == "a1" || string(data) == "a3" {
			return nil, claimcheck.Permanent(errors.New("rejected"))
		}
		return nil, nil
	})})

	all := append(slices.Clone(alpha), beta)
	for _, tc := range []struct {
		opts pipeline.ListOptions
		want []int64
	}{
		{pipeline.ListOptions{}, all},
		{pipeline.ListOptions{PageSize: 1}, all},
		{pipeline.ListOptions{PageSize: 2}, all},
		{pipeline.ListOptions{Kind: "alpha", PageSize: 2}, alpha},
		{pipeline.ListOptions{Kind: "beta", PageSize: 2}, []int64{beta}},
		{pipeline.ListOptions{State: pipeline.StateDead, PageSize: 1}, []int64{alpha[1], alpha[3]}},
		{pipeline.ListOptions{State: "cancelled"}, []int64{alpha[1], alpha[3]}},
		{pipeline.ListOptions{State: "discarded"}, nil},
		{pipeline.ListOptions{State: "completed", PageSize: 2}, []int64{alpha[0], alpha[2], alpha[4]}},
		{pipeline.ListOptions{State: "available"}, []int64{beta}},
		{pipeline.ListOptions{State: "available", Kind: "alpha"}, nil},
		{pipeline.ListOptions{State: pipeline.StateDead, Kind: "beta"}, nil},
		{pipeline.ListOptions{Kind: "gamma"}, nil},
		{pipeline.ListOptions{Newest: true, PageSize: 2}, reversed(all)},
		{pipeline.ListOptions{AfterID: alpha[2], PageSize: 2}, []int64{alpha[3], alpha[4], beta}},
		{pipeline.ListOptions{Newest: true, AfterID: alpha[2], PageSize: 1}, []int64{alpha[1], alpha[0]}},
		{pipeline.ListOptions{Newest: true, State: pipeline.StateDead, Limit: 1}, []int64{alpha[3]}},
		{pipeline.ListOptions{Newest: true, State: pipeline.StateDead, AfterID: alpha[3]}, []int64{alpha[1]}},
		{pipeline.ListOptions{Tenants: []string{"acme", "globex"}, Kind: "beta"}, []int64{beta}},
		{pipeline.ListOptions{Tenants: []string{"globex"}}, nil},
	} {
		if got := b.listIDs(t, tc.opts); !slices.Equal(got, tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.opts, got, tc.want)
		}
	}

	for _, j := range b.list(t, pipeline.ListOptions{State: pipeline.StateDead}) {
		if j.Reason != claimcheck.ReasonHandler || j.Kind != "alpha" || !j.Dead {
			t.Errorf("dead job %d: kind %s dead %v reason %q", j.ID, j.Kind, j.Dead, j.Reason)
		}
	}

	for _, o := range []pipeline.ListOptions{{State: "bogus"}, {State: "DEAD"}, {Kind: "Bad"}} {
		err := b.p.List(b.ctx, o, func(*pipeline.JobInfo) error { t.Fatal("fn called"); return nil })
		if !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("List(%+v): %v, want ErrConfig", o, err)
		}
	}

	// fn's error stops the listing and is returned.
	stop := errors.New("stop")
	n := 0
	err := b.p.List(b.ctx, pipeline.ListOptions{PageSize: 2}, func(*pipeline.JobInfo) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("List stopping at the third job: err %v after %d calls", err, n)
	}
}

// Listing a backlog pages through it; nothing loads it all.
func (s *suite) testListLargeBacklog(t *testing.T) {
	t.Parallel()
	b := s.setup(t, &opts{store: claimcheck.Options{AlwaysOffload: true}})
	const n = 200
	var want []int64
	for i := range n {
		want = append(want, b.enqueue(t, "bulk", "acme", fmt.Appendf(nil, "payload %03d", i), nil).JobID)
	}
	var got []int64
	keys := make(map[string]bool)
	err := b.p.List(b.ctx, pipeline.ListOptions{Kind: "bulk", State: "available", PageSize: 50}, func(j *pipeline.JobInfo) error {
		got = append(got, j.ID)
		if j.Inline || j.Ticket() == nil || j.TicketBytes > claimcheck.MaxTicketBytes {
			return fmt.Errorf("job %d: inline %v ticket %v (%d bytes)", j.ID, j.Inline, j.Ticket() != nil, j.TicketBytes)
		}
		keys[j.Ticket().Key] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List visited %d jobs %v…, want %d in id order", len(got), got[:min(len(got), 5)], n)
	}
	if len(keys) != n {
		t.Fatalf("%d distinct object keys, want %d", len(keys), n)
	}
	if c := b.count(t, `SELECT count(*) FROM claimcheck_claim WHERE role = 'payload'`); c != n {
		t.Fatalf("%d payload registry rows, want %d", c, n)
	}
}

// The claims registry's rows: what they hold, and that created_at reads back
// as the ticket's check-in instant (to the database's precision, at worst
// PostgreSQL's microsecond).
func (s *suite) testRegistry(t *testing.T) {
	t.Parallel()
	b := s.setup(t, &opts{store: claimcheck.Options{AlwaysOffload: true}})
	res := b.enqueue(t, "docs", "acme", []byte("registered"), nil)
	other := b.enqueue(t, "docs", "zeta", []byte("registered"), nil)
	h := &recorder{fn: func(_ context.Context, _ *claimcheck.Job, data []byte) (*claimcheck.Result, error) {
		return &claimcheck.Result{Body: bytes.NewReader(append([]byte("done: "), data...))}, nil
	}}
	b.work(t, map[string]claimcheck.Handler{"docs": h})
	rows := b.claims(t, 0)
	if len(rows) != 4 {
		t.Fatalf("registry %+v, want payload and result rows of 2 jobs", rows)
	}
	for _, r := range rows {
		var tenant string
		switch r.JobID {
		case res.JobID:
			tenant = "acme"
		case other.JobID:
			tenant = "zeta"
		default:
			t.Fatalf("registry row of unknown job: %+v", r)
		}
		if r.Tenant != tenant || len(r.SHA256) != 64 {
			t.Fatalf("registry row %+v, want tenant %s and a full sha256", r, tenant)
		}
		switch r.Role {
		case rolePayload:
			if !strings.HasPrefix(r.Key, claimcheck.PrefixPayloads+tenant+"/") {
				t.Fatalf("payload row %+v not under payloads/%s/", r, tenant)
			}
		case roleResult:
			if !strings.HasPrefix(r.Key, claimcheck.PrefixResults+tenant+"/") || r.SHA256 != sha([]byte("done: registered")) {
				t.Fatalf("result row %+v", r)
			}
		default:
			t.Fatalf("registry row with role %q", r.Role)
		}
	}

	// created_at holds the check-in instant, in UTC or with its zone.
	var created time.Time
	if err := b.p.DB().QueryRowContext(b.ctx, `SELECT created_at FROM claimcheck_claim WHERE job_id = $1 AND role = $2`, res.JobID, rolePayload).Scan(&created); err != nil {
		t.Fatalf("read created_at: %v", err)
	}
	if d := created.Sub(res.Ticket.Created); d < -time.Microsecond || d > time.Microsecond {
		t.Fatalf("created_at = %v, want the ticket's %v", created, res.Ticket.Created)
	}
	// Objects older than a moment ago: every row, whatever the session's
	// time zone (the sweeper's question).
	if n := b.count(t, `SELECT count(*) FROM claimcheck_claim WHERE created_at < $1`, time.Now().Add(time.Minute).UTC()); n != 4 {
		t.Fatalf("%d rows created before a minute from now, want 4", n)
	}
	if n := b.count(t, `SELECT count(*) FROM claimcheck_claim WHERE created_at < $1`, res.Ticket.Created.Add(-time.Minute).UTC()); n != 0 {
		t.Fatalf("%d rows created before a minute before check-in, want 0", n)
	}
}

// PriorityBacklog is how many priority-4 jobs testPriority enqueues before
// its priority-1 job.
const PriorityBacklog = 50

func (s *suite) testPriority(t *testing.T) {
	t.Parallel()
	b := s.setup(t, nil)
	if _, err := b.p.Enqueue(b.ctx, "labels", "acme", strings.NewReader("x"), &pipeline.EnqueueOptions{Priority: 5}); !errors.Is(err, claimcheck.ErrTicketInvalid) {
		t.Fatalf("Enqueue with priority 5: %v, want ErrTicketInvalid", err)
	}
	var low []int64
	for i := range PriorityBacklog {
		res := b.enqueue(t, "labels", "acme", []byte(fmt.Sprintf("routine %d", i)), &pipeline.EnqueueOptions{Priority: pipeline.LowestPriority})
		low = append(low, res.JobID)
	}
	urgent := b.enqueue(t, "labels", "acme", []byte("urgent"), &pipeline.EnqueueOptions{Priority: pipeline.HighestPriority})
	plain := b.enqueue(t, "labels", "acme", []byte("no priority given"), nil)
	if j := b.get(t, low[0]); j.Priority != 4 {
		t.Fatalf("a priority-4 job lists priority %d", j.Priority)
	}
	if j := b.get(t, plain.JobID); j.Priority != pipeline.DefaultPriority {
		t.Fatalf("a job without a priority lists priority %d, want %d", j.Priority, pipeline.DefaultPriority)
	}
	var mu sync.Mutex
	var order []int64
	h := claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) { return nil, nil })
	// One at a time, so the order is the fetch order; 52 jobs one by one
	// take about 30 s on SQLite under -race on a loaded 2-core machine.
	ctx, cancel := context.WithTimeout(b.ctx, 4*WorkTimeout)
	defer cancel()
	start := time.Now()
	err := b.p.Work(ctx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{"labels": h}, Concurrency: 1, UntilEmpty: true,
		OnDone: func(o pipeline.Outcome) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, o.JobID)
		}})
	if err != nil {
		t.Fatalf("Work: %v", err)
	}
	if len(order) != PriorityBacklog+2 {
		t.Fatalf("%d jobs worked, want %d", len(order), PriorityBacklog+2)
	}
	// Both priority-1 jobs first, oldest first; then the backlog in order.
	if order[0] != urgent.JobID || order[1] != plain.JobID {
		t.Fatalf("worked first jobs %v, want the priority-1 jobs %d and %d before the %d priority-4 ones", order[:2], urgent.JobID, plain.JobID, PriorityBacklog)
	}
	if !slices.Equal(order[2:], low) {
		t.Fatalf("priority-4 jobs worked in order %v, want %v", order[2:], low)
	}
	t.Logf("priority-1 job %d enqueued after %d priority-4 jobs was worked first (%d jobs in %v)", urgent.JobID, PriorityBacklog, len(order), time.Since(start).Round(time.Millisecond))
}

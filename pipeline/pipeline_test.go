package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
)

// workTimeout bounds every Work(UntilEmpty) call: a job that never settles
// fails the test instead of hanging it.
const workTimeout = 30 * time.Second

// testBundle is what most tests need: a pipeline on a SQLite file, over a
// file:// store, both in fresh temporary directories.
type testBundle struct {
	ctx    context.Context
	p      *Pipeline
	store  *claimcheck.Store
	root   string // the bucket's directory
	dbPath string
}

type testOpts struct {
	// store options; SpoolDir is set to a fresh directory.
	store claimcheck.Options
	// cfg is the pipeline's configuration; Database and Store are filled in,
	// RetryBase defaults to 10ms.
	cfg Config
}

func setup(t *testing.T, opts *testOpts) *testBundle {
	t.Helper()
	if opts == nil {
		opts = &testOpts{}
	}
	ctx := t.Context()
	dir := t.TempDir()
	b := &testBundle{ctx: ctx, root: filepath.Join(dir, "bucket"), dbPath: filepath.Join(dir, "jobs.db")}

	so := opts.store
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

	cfg := opts.cfg
	cfg.Database = "sqlite://" + b.dbPath
	cfg.Store = store
	if cfg.RetryBase == 0 {
		cfg.RetryBase = 10 * time.Millisecond
	}
	p, err := Open(ctx, cfg)
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

func (b *testBundle) enqueue(t *testing.T, kind, tenant string, data []byte, opts *EnqueueOptions) *EnqueueResult {
	t.Helper()
	res, err := b.p.Enqueue(b.ctx, kind, tenant, bytes.NewReader(data), opts)
	if err != nil {
		t.Fatalf("Enqueue(%s, %s, %d bytes): %v", kind, tenant, len(data), err)
	}
	return res
}

// work runs Work until the handled kinds' queues are empty.
func (b *testBundle) work(t *testing.T, handlers map[string]claimcheck.Handler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, workTimeout)
	defer cancel()
	if err := b.p.Work(ctx, WorkOptions{Handlers: handlers, UntilEmpty: true}); err != nil {
		t.Fatalf("Work: %v", err)
	}
}

func (b *testBundle) get(t *testing.T, id int64) *JobInfo {
	t.Helper()
	j, err := b.p.Get(b.ctx, id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return j
}

func (b *testBundle) list(t *testing.T, opts ListOptions) []*JobInfo {
	t.Helper()
	var jobs []*JobInfo
	if err := b.p.List(b.ctx, opts, func(j *JobInfo) error {
		jobs = append(jobs, j)
		return nil
	}); err != nil {
		t.Fatalf("List(%+v): %v", opts, err)
	}
	return jobs
}

func (b *testBundle) listIDs(t *testing.T, opts ListOptions) []int64 {
	t.Helper()
	var ids []int64
	for _, j := range b.list(t, opts) {
		ids = append(ids, j.ID)
	}
	return ids
}

func (b *testBundle) openResult(t *testing.T, id int64) ([]byte, *claimcheck.Ticket) {
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
func (b *testBundle) objectPath(tk *claimcheck.Ticket) string {
	return filepath.Join(b.root, filepath.FromSlash(tk.Key))
}

type claimRow struct {
	JobID  int64
	Role   string
	Key    string
	SHA256 string
	Size   int64
	Tenant string
}

// claims reads the claims registry, ordered by job and role. With jobID > 0
// only that job's rows.
func (b *testBundle) claims(t *testing.T, jobID int64) []claimRow {
	t.Helper()
	q := `SELECT job_id, role, object_key, sha256, size, tenant FROM claimcheck_claim`
	var args []any
	if jobID > 0 {
		q += ` WHERE job_id = $1`
		args = append(args, jobID)
	}
	rows, err := b.p.DB().QueryContext(b.ctx, q+` ORDER BY job_id, role, object_key`, args...)
	if err != nil {
		t.Fatalf("query claims registry: %v", err)
	}
	defer rows.Close()
	var out []claimRow
	for rows.Next() {
		var r claimRow
		if err := rows.Scan(&r.JobID, &r.Role, &r.Key, &r.SHA256, &r.Size, &r.Tenant); err != nil {
			t.Fatalf("scan claims registry: %v", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("claims registry rows: %v", err)
	}
	return out
}

func (b *testBundle) count(t *testing.T, query string, args ...any) int {
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

func readPDF(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "pdf", name))
	if err != nil {
		t.Fatalf("read test PDF: %v", err)
	}
	return data
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
}

func (r *recorder) Handle(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
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
	r.mu.Lock()
	r.calls = append(r.calls, call{job.ID, job.Kind, job.Tenant, job.Attempt, data})
	r.mu.Unlock()
	if r.fn == nil {
		return nil, nil
	}
	return r.fn(ctx, job, data)
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
func wantJob(t *testing.T, j *JobInfo, state string, attempts int, dead bool, reason string) {
	t.Helper()
	if j.State != state || j.Attempts != attempts || j.Dead != dead || j.Reason != reason {
		t.Fatalf("job %d: state=%s attempts=%d dead=%v reason=%q (error %q); want state=%s attempts=%d dead=%v reason=%q",
			j.ID, j.State, j.Attempts, j.Dead, j.Reason, j.Error, state, attempts, dead, reason)
	}
}

// 1. Enqueue then Work.
func TestEnqueueAndWork(t *testing.T) {
	t.Parallel()

	t.Run("OffloadedPDF", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		pdf := readPDF(t, "bash.pdf")
		if int64(len(pdf)) <= claimcheck.DefaultInlineThreshold {
			t.Fatalf("bash.pdf is %d bytes, too small to be offloaded", len(pdf))
		}
		res := b.enqueue(t, "pdf-info", "acme", pdf, &EnqueueOptions{CheckIn: claimcheck.CheckInOptions{ContentType: "application/pdf"}})
		if res.Duplicate || res.Ticket.IsInline() {
			t.Fatalf("Enqueue: duplicate=%v inline=%v, want an offloaded new job", res.Duplicate, res.Ticket.IsInline())
		}
		if res.TicketBytes > claimcheck.MaxTicketBytes {
			t.Fatalf("ticket is %d bytes, budget %d", res.TicketBytes, claimcheck.MaxTicketBytes)
		}
		if !strings.HasPrefix(res.Ticket.Key, claimcheck.PrefixPayloads+"acme/") || res.Ticket.SHA256 != sha(pdf) || res.Ticket.Size != int64(len(pdf)) {
			t.Fatalf("ticket = key %q sha256 %s size %d; want under payloads/acme/, sha256 %s, size %d",
				res.Ticket.Key, res.Ticket.SHA256, res.Ticket.Size, sha(pdf), len(pdf))
		}

		// Before work: available, not yet attempted, payload row registered.
		wantJob(t, b.get(t, res.JobID), "available", 0, false, "")

		result := append([]byte("checked:"), pdf...) // > inline threshold: offloaded
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
		if !bytes.Equal(c.data, pdf) {
			t.Fatalf("handler saw %d bytes (sha256 %s), want the PDF's %d bytes (sha256 %s)", len(c.data), sha(c.data), len(pdf), sha(pdf))
		}
		if c.jobID != strconv.FormatInt(res.JobID, 10) || c.kind != "pdf-info" || c.tenant != "acme" || c.attempt != 1 {
			t.Fatalf("handler saw job %+v, want id %d kind pdf-info tenant acme attempt 1", c, res.JobID)
		}

		j := b.get(t, res.JobID)
		wantJob(t, j, "completed", 1, false, "")
		if j.Kind != "pdf-info" || j.Tenant != "acme" || j.Inline || j.Size != int64(len(pdf)) || j.SHA256 != sha(pdf)[:12] || j.TicketBytes != res.TicketBytes {
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

		want := []claimRow{
			{res.JobID, rolePayload, res.Ticket.Key, sha(pdf), int64(len(pdf)), "acme"},
			{res.JobID, roleResult, rt.Key, sha(result), int64(len(result)), "acme"},
		}
		if got := b.claims(t, 0); !slices.Equal(got, want) {
			t.Fatalf("claims registry =\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("InlinePayload", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
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
			t.Fatalf("handler calls = %+v, want one with %q", calls, payload)
		}
		j := b.get(t, res.JobID)
		wantJob(t, j, "completed", 1, false, "")
		if !j.Inline || !j.HasResult {
			t.Fatalf("job inline=%v has_result=%v, want both", j.Inline, j.HasResult)
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
		b := setup(t, &testOpts{store: claimcheck.Options{AlwaysOffload: true}})
		res := b.enqueue(t, "noop", "acme", []byte("x"), nil)
		h := &recorder{}
		b.work(t, map[string]claimcheck.Handler{"noop": h})
		j := b.get(t, res.JobID)
		wantJob(t, j, "completed", 1, false, "")
		if j.HasResult || j.ResultTicket() != nil {
			t.Fatalf("job without a result reports one")
		}
		if _, _, err := b.p.OpenResult(b.ctx, res.JobID); !errors.Is(err, ErrNoResult) {
			t.Fatalf("OpenResult of a job without result: %v, want ErrNoResult", err)
		}
		want := []claimRow{{res.JobID, rolePayload, res.Ticket.Key, sha([]byte("x")), 1, "acme"}}
		if got := b.claims(t, 0); !slices.Equal(got, want) {
			t.Fatalf("claims registry = %+v, want %+v", got, want)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &testOpts{store: claimcheck.Options{AlwaysOffload: true}})
		const n = 12
		ids := make(map[int64][]byte)
		for i := range n {
			data := fmt.Appendf(nil, "payload %d", i)
			ids[b.enqueue(t, "echo", "acme", data, nil).JobID] = data
		}
		h := &recorder{fn: func(_ context.Context, _ *claimcheck.Job, data []byte) (*claimcheck.Result, error) {
			return &claimcheck.Result{Body: bytes.NewReader(append([]byte("re: "), data...))}, nil
		}}
		ctx, cancel := context.WithTimeout(b.ctx, workTimeout)
		defer cancel()
		if err := b.p.Work(ctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"echo": h}, Concurrency: 4, UntilEmpty: true}); err != nil {
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

// 2. EnqueueTx is a transactional outbox.
func TestEnqueueTx(t *testing.T) {
	t.Parallel()

	run := func(t *testing.T, commit bool) {
		b := setup(t, &testOpts{store: claimcheck.Options{AlwaysOffload: true}})
		db := b.p.DB()
		if _, err := db.ExecContext(b.ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)`); err != nil {
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
		if _, err := tx.ExecContext(b.ctx, `INSERT INTO orders (id, note) VALUES (42, 'label')`); err != nil {
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
		jobs := b.list(t, ListOptions{})
		orders := b.count(t, `SELECT count(*) FROM orders`)
		claims := b.claims(t, 0)
		if !commit {
			if len(jobs) != 0 || orders != 0 || len(claims) != 0 {
				t.Fatalf("after rollback: %d jobs, %d orders, registry %+v; want none", len(jobs), orders, claims)
			}
			if _, err := b.p.Get(b.ctx, res.JobID); !errors.Is(err, ErrJobNotFound) {
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
		want := []claimRow{{res.JobID, rolePayload, tk.Key, sha(payload), int64(len(payload)), "acme"}}
		if !slices.Equal(claims, want) {
			t.Fatalf("after commit: registry %+v, want %+v", claims, want)
		}
		h := &recorder{}
		b.work(t, map[string]claimcheck.Handler{"labels": h})
		if calls, _ := h.snapshot(); len(calls) != 1 || !bytes.Equal(calls[0].data, payload) {
			t.Fatalf("handler calls %+v, want one with %q", calls, payload)
		}
		wantJob(t, b.get(t, res.JobID), "completed", 1, false, "")
	}

	t.Run("Rollback", func(t *testing.T) { t.Parallel(); run(t, false) })
	t.Run("Commit", func(t *testing.T) { t.Parallel(); run(t, true) })
}

// 3. Idempotency keys.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()

	t.Run("SameKindTenantKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &testOpts{store: claimcheck.Options{AlwaysOffload: true}})
		opts := &EnqueueOptions{IdempotencyKey: "order-42"}
		first := b.enqueue(t, "labels", "acme", []byte("first"), opts)
		second := b.enqueue(t, "labels", "acme", []byte("second"), opts)
		if first.Duplicate {
			t.Fatalf("first enqueue reported a duplicate")
		}
		if !second.Duplicate || second.JobID != first.JobID {
			t.Fatalf("second enqueue: job %d duplicate %v; want job %d duplicate", second.JobID, second.Duplicate, first.JobID)
		}
		if second.Ticket.SHA256 != sha([]byte("first")) || second.TicketBytes != first.TicketBytes {
			t.Fatalf("duplicate returned ticket sha256 %s (%d bytes), want the first job's", second.Ticket.SHA256, second.TicketBytes)
		}
		if ids := b.listIDs(t, ListOptions{}); !slices.Equal(ids, []int64{first.JobID}) {
			t.Fatalf("jobs %v, want only %d", ids, first.JobID)
		}
		if rows := b.claims(t, 0); len(rows) != 1 || rows[0].Key != first.Ticket.Key {
			t.Fatalf("registry %+v, want the first job's payload row only", rows)
		}
	})

	t.Run("OtherTenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		opts := &EnqueueOptions{IdempotencyKey: "order-42"}
		a := b.enqueue(t, "labels", "acme", []byte("x"), opts)
		o := b.enqueue(t, "labels", "other", []byte("x"), opts)
		if a.Duplicate || o.Duplicate || a.JobID == o.JobID {
			t.Fatalf("jobs %d (dup %v) and %d (dup %v), want two new jobs", a.JobID, a.Duplicate, o.JobID, o.Duplicate)
		}
		if ids := b.listIDs(t, ListOptions{}); len(ids) != 2 {
			t.Fatalf("jobs %v, want 2", ids)
		}
	})

	t.Run("OtherKind", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		opts := &EnqueueOptions{IdempotencyKey: "order-42"}
		a := b.enqueue(t, "labels", "acme", []byte("x"), opts)
		o := b.enqueue(t, "invoices", "acme", []byte("x"), opts)
		if a.Duplicate || o.Duplicate || a.JobID == o.JobID {
			t.Fatalf("jobs %d (dup %v) and %d (dup %v), want two new jobs", a.JobID, a.Duplicate, o.JobID, o.Duplicate)
		}
	})

	t.Run("EmptyKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		a := b.enqueue(t, "labels", "acme", []byte("x"), nil)
		o := b.enqueue(t, "labels", "acme", []byte("x"), &EnqueueOptions{})
		if a.Duplicate || o.Duplicate || a.JobID == o.JobID {
			t.Fatalf("jobs %d (dup %v) and %d (dup %v), want two new jobs", a.JobID, a.Duplicate, o.JobID, o.Duplicate)
		}
		if ids := b.listIDs(t, ListOptions{}); len(ids) != 2 {
			t.Fatalf("jobs %v, want 2", ids)
		}
	})

	t.Run("DeadJobDoesNotCount", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		opts := &EnqueueOptions{IdempotencyKey: "order-42"}
		first := b.enqueue(t, "labels", "acme", []byte("x"), opts)
		b.work(t, map[string]claimcheck.Handler{"labels": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return nil, claimcheck.Permanent(errors.New("bad label"))
		})})
		wantJob(t, b.get(t, first.JobID), "cancelled", 1, true, claimcheck.ReasonHandler)
		again := b.enqueue(t, "labels", "acme", []byte("x"), opts)
		if again.Duplicate || again.JobID == first.JobID {
			t.Fatalf("enqueue after the first job died: job %d duplicate %v, want a new job", again.JobID, again.Duplicate)
		}
	})

	t.Run("TooLong", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, err := b.p.Enqueue(b.ctx, "labels", "acme", strings.NewReader("x"), &EnqueueOptions{IdempotencyKey: strings.Repeat("k", MaxIdempotencyKeyLen+1)})
		if !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Fatalf("Enqueue with a %d-byte key: %v, want ErrTicketInvalid", MaxIdempotencyKeyLen+1, err)
		}
		b.enqueue(t, "labels", "acme", []byte("x"), &EnqueueOptions{IdempotencyKey: strings.Repeat("k", MaxIdempotencyKeyLen)})
	})
}

// 4. Permanent failures dead-letter on the first attempt, with a reason, and
// the handler never sees unverified bytes.
func TestPermanentFailures(t *testing.T) {
	t.Parallel()

	// Offloaded, with the default MaxAttempts (5): a dead letter on attempt 1
	// can only come from cancellation, not exhausted retries.
	offloaded := &testOpts{store: claimcheck.Options{AlwaysOffload: true}}

	deadOnFirst := func(t *testing.T, b *testBundle, id int64, h *recorder, reason string, handlerCalls int) *JobInfo {
		t.Helper()
		b.work(t, map[string]claimcheck.Handler{"docs": h})
		j := b.get(t, id)
		wantJob(t, j, "cancelled", 1, true, reason)
		if calls, openErr := h.snapshot(); len(calls) != handlerCalls || openErr != nil {
			t.Fatalf("handler called %d times (open error %v), want %d", len(calls), openErr, handlerCalls)
		}
		if ids := b.listIDs(t, ListOptions{State: StateDead}); !slices.Equal(ids, []int64{id}) {
			t.Fatalf("dead letters %v, want [%d]", ids, id)
		}
		return j
	}

	t.Run("PayloadMissing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, offloaded)
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
		b := setup(t, nil)
		pdf := readPDF(t, "refcard-a4.pdf")
		res := b.enqueue(t, "docs", "acme", pdf, nil)
		path := b.objectPath(res.Ticket)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read object file: %v", err)
		}
		if !bytes.Equal(data, pdf) {
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
		b := setup(t, offloaded)
		res := b.enqueue(t, "docs", "acme", []byte("0123456789"), nil)
		if err := os.Truncate(b.objectPath(res.Ticket), 5); err != nil {
			t.Fatal(err)
		}
		deadOnFirst(t, b, res.JobID, &recorder{}, claimcheck.ReasonPayloadCorrupt, 0)
	})

	t.Run("HandlerPermanent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, offloaded)
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

	// Jobs whose ticket is broken can only come from outside Enqueue (a bug,
	// an old producer, an attacker): insert them with River directly.
	insertRaw := func(t *testing.T, b *testBundle, tenant string, ticket json.RawMessage) int64 {
		t.Helper()
		ins, err := b.p.client.Insert(b.ctx, jobArgs{JobKind: "docs", Tenant: tenant, Ticket: ticket}, &river.InsertOpts{Queue: "docs"})
		if err != nil {
			t.Fatalf("insert raw job: %v", err)
		}
		return ins.Job.ID
	}
	validTicket := func(t *testing.T, b *testBundle, tenant string) *claimcheck.Ticket {
		t.Helper()
		tk, err := b.store.CheckIn(b.ctx, tenant, strings.NewReader("valid payload"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	marshal := func(t *testing.T, tk *claimcheck.Ticket) []byte {
		t.Helper()
		enc, err := tk.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return enc
	}

	for _, tc := range []struct {
		name   string
		tenant string
		ticket func(t *testing.T, b *testBundle) json.RawMessage
	}{
		{"TicketTruncated", "acme", func(*testing.T, *testBundle) json.RawMessage {
			return json.RawMessage(`"{\"v\":1,\"ten"`)
		}},
		{"TicketNotAnObject", "acme", func(*testing.T, *testBundle) json.RawMessage {
			return json.RawMessage(`[1,2,3]`)
		}},
		{"TicketNull", "acme", func(*testing.T, *testBundle) json.RawMessage {
			return json.RawMessage(`null`)
		}},
		{"TicketVersion99", "acme", func(t *testing.T, b *testBundle) json.RawMessage {
			enc := marshal(t, validTicket(t, b, "acme"))
			v99 := bytes.Replace(enc, []byte(`"v":1,`), []byte(`"v":99,`), 1)
			if bytes.Equal(v99, enc) {
				t.Fatalf("ticket %s has no \"v\":1", enc)
			}
			return v99
		}},
		{"TenantMismatch", "other", func(t *testing.T, b *testBundle) json.RawMessage {
			return marshal(t, validTicket(t, b, "acme"))
		}},
		{"ForeignKey", "evil", func(t *testing.T, b *testBundle) json.RawMessage {
			// A ticket claiming tenant evil but pointing at acme's object.
			tk := validTicket(t, b, "acme")
			return json.RawMessage(bytes.Replace(marshal(t, tk), []byte(`"tenant":"acme"`), []byte(`"tenant":"evil"`), 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, offloaded)
			id := insertRaw(t, b, tc.tenant, tc.ticket(t, b))
			deadOnFirst(t, b, id, &recorder{}, claimcheck.ReasonTicketInvalid, 0)
		})
	}
}

// 5. Transient failures are retried, then dead-lettered.
func TestTransientFailures(t *testing.T) {
	t.Parallel()

	t.Run("ExhaustsMaxAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &testOpts{cfg: Config{MaxAttempts: 3}})
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
		if ids := b.listIDs(t, ListOptions{State: StateDead}); !slices.Equal(ids, []int64{res.JobID}) {
			t.Fatalf("dead letters %v, want [%d]", ids, res.JobID)
		}
	})

	t.Run("PerJobMaxAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &testOpts{cfg: Config{MaxAttempts: 5}})
		res := b.enqueue(t, "flaky", "acme", []byte("payload"), &EnqueueOptions{MaxAttempts: 2})
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
		b := setup(t, &testOpts{cfg: Config{MaxAttempts: 3}})
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

// 6. Replay of dead letters.
func TestReplay(t *testing.T) {
	t.Parallel()

	t.Run("MissingPayloadRestored", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &testOpts{store: claimcheck.Options{AlwaysOffload: true}})
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
			t.Fatalf("handler calls %+v, want one on attempt 2 with the payload", calls)
		}
		if got, _ := b.openResult(t, res.JobID); string(got) != "LOST AND FOUND" {
			t.Fatalf("result %q", got)
		}
		if ids := b.listIDs(t, ListOptions{State: StateDead}); len(ids) != 0 {
			t.Fatalf("dead letters after replay: %v", ids)
		}

		// A completed job is not dead.
		if _, err := b.p.Replay(b.ctx, res.JobID); !errors.Is(err, ErrNotDead) {
			t.Fatalf("Replay(completed): %v, want ErrNotDead", err)
		}
	})

	t.Run("DiscardedJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &testOpts{cfg: Config{MaxAttempts: 2}})
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
		b := setup(t, nil)
		res := b.enqueue(t, "docs", "acme", []byte("waiting"), nil)
		if _, err := b.p.Replay(b.ctx, res.JobID); !errors.Is(err, ErrNotDead) {
			t.Fatalf("Replay(available): %v, want ErrNotDead", err)
		}
		wantJob(t, b.get(t, res.JobID), "available", 0, false, "")
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		if _, err := b.p.Get(b.ctx, 12345); !errors.Is(err, ErrJobNotFound) {
			t.Fatalf("Get(unknown): %v, want ErrJobNotFound", err)
		}
		if _, err := b.p.Replay(b.ctx, 12345); !errors.Is(err, ErrJobNotFound) {
			t.Fatalf("Replay(unknown): %v, want ErrJobNotFound", err)
		}
		if _, _, err := b.p.OpenResult(b.ctx, 12345); !errors.Is(err, ErrJobNotFound) {
			t.Fatalf("OpenResult(unknown): %v, want ErrJobNotFound", err)
		}
	})
}

// 7. List.
func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)

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
		opts ListOptions
		want []int64
	}{
		{ListOptions{}, all},
		{ListOptions{PageSize: 1}, all},
		{ListOptions{PageSize: 2}, all},
		{ListOptions{Kind: "alpha", PageSize: 2}, alpha},
		{ListOptions{Kind: "beta", PageSize: 2}, []int64{beta}},
		{ListOptions{State: StateDead, PageSize: 1}, []int64{alpha[1], alpha[3]}},
		{ListOptions{State: "cancelled"}, []int64{alpha[1], alpha[3]}},
		{ListOptions{State: "discarded"}, nil},
		{ListOptions{State: "completed", PageSize: 2}, []int64{alpha[0], alpha[2], alpha[4]}},
		{ListOptions{State: "available"}, []int64{beta}},
		{ListOptions{State: "available", Kind: "alpha"}, nil},
		{ListOptions{State: StateDead, Kind: "beta"}, nil},
		{ListOptions{Kind: "gamma"}, nil},
	} {
		if got := b.listIDs(t, tc.opts); !slices.Equal(got, tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.opts, got, tc.want)
		}
	}

	for _, j := range b.list(t, ListOptions{State: StateDead}) {
		if j.Reason != claimcheck.ReasonHandler || j.Kind != "alpha" || !j.Dead {
			t.Errorf("dead job %d: kind %s dead %v reason %q", j.ID, j.Kind, j.Dead, j.Reason)
		}
	}

	for _, opts := range []ListOptions{{State: "bogus"}, {State: "DEAD"}, {Kind: "Bad"}} {
		err := b.p.List(b.ctx, opts, func(*JobInfo) error { t.Fatal("fn called"); return nil })
		if !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("List(%+v): %v, want ErrConfig", opts, err)
		}
	}

	// fn's error stops the listing and is returned.
	stop := errors.New("stop")
	n := 0
	err := b.p.List(b.ctx, ListOptions{PageSize: 2}, func(*JobInfo) error {
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

// 8. Open and Work reject bad configurations.
func TestConfig(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	openStore := func(t *testing.T, opts claimcheck.Options) *claimcheck.Store {
		t.Helper()
		dir := t.TempDir()
		opts.SpoolDir = filepath.Join(dir, "spool")
		s, err := claimcheck.OpenStore(ctx, "file://"+filepath.Join(dir, "bucket"), &opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	tryOpen := func(t *testing.T, cfg Config) error {
		t.Helper()
		if cfg.Database == "" {
			cfg.Database = "sqlite://" + filepath.Join(t.TempDir(), "jobs.db")
		}
		p, err := Open(ctx, cfg)
		if err == nil {
			p.Close()
		}
		return err
	}

	t.Run("NilStore", func(t *testing.T) {
		t.Parallel()
		if err := tryOpen(t, Config{}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Fatalf("Open without a store: %v, want ErrConfig", err)
		}
	})

	t.Run("InlineThresholdAboveMaxMessageSize", func(t *testing.T) {
		t.Parallel()
		s := openStore(t, claimcheck.Options{InlineThreshold: 1 << 20})
		if err := tryOpen(t, Config{Store: s}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Fatalf("Open with a 1 MiB inline threshold: %v, want ErrConfig", err)
		}
		// The same store fits a transport that allows 2 MiB messages.
		if err := tryOpen(t, Config{Store: s, MaxMessageSize: 2 << 20}); err != nil {
			t.Fatalf("Open with MaxMessageSize 2 MiB: %v", err)
		}
	})

	t.Run("MaxMessageSizeBelowTicket", func(t *testing.T) {
		t.Parallel()
		s := openStore(t, claimcheck.Options{AlwaysOffload: true})
		if err := tryOpen(t, Config{Store: s, MaxMessageSize: claimcheck.MaxTicketBytes}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Fatalf("Open with MaxMessageSize = ticket budget (no room for the job's arguments): %v, want ErrConfig", err)
		}
	})

	t.Run("DefaultStoreFits", func(t *testing.T) {
		t.Parallel()
		if err := tryOpen(t, Config{Store: openStore(t, claimcheck.Options{})}); err != nil {
			t.Fatalf("Open with the default inline threshold and message size: %v", err)
		}
	})

	t.Run("BadDatabaseURL", func(t *testing.T) {
		t.Parallel()
		s := openStore(t, claimcheck.Options{})
		for _, db := range []string{"postgres://localhost/test", "sqlite://"} {
			p, err := Open(ctx, Config{Store: s, Database: db})
			if err == nil {
				p.Close()
			}
			if !errors.Is(err, claimcheck.ErrConfig) {
				t.Errorf("Open(Database %q): %v, want ErrConfig", db, err)
			}
		}
	})

	t.Run("ValidateKind", func(t *testing.T) {
		t.Parallel()
		for _, kind := range []string{"", "a", "Bad", "x y", "pdf--info", "-pdf", "pdf-", "pdf.info", strings.Repeat("k", 65)} {
			if err := ValidateKind(kind); err == nil {
				t.Errorf("ValidateKind(%q) = nil, want an error", kind)
			}
		}
		for _, kind := range []string{"pdf-info", "ab", "a1", "pdf_info_v2", strings.Repeat("k", 64)} {
			if err := ValidateKind(kind); err != nil {
				t.Errorf("ValidateKind(%q) = %v, want nil", kind, err)
			}
		}
	})

	t.Run("EnqueueAndWorkArguments", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		if _, err := b.p.Enqueue(b.ctx, "Bad", "acme", strings.NewReader("x"), nil); !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("Enqueue(kind Bad): %v, want ErrTicketInvalid", err)
		}
		if _, err := b.p.Enqueue(b.ctx, "docs", "Acme", strings.NewReader("x"), nil); !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("Enqueue(tenant Acme): %v, want ErrTicketInvalid", err)
		}
		if _, err := b.p.Enqueue(b.ctx, "docs", "acme", strings.NewReader("x"), &EnqueueOptions{MaxAttempts: -1}); !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("Enqueue(MaxAttempts -1): %v, want ErrTicketInvalid", err)
		}
		if n := len(b.list(t, ListOptions{})); n != 0 {
			t.Errorf("rejected enqueues left %d jobs", n)
		}
		if err := b.p.Work(b.ctx, WorkOptions{UntilEmpty: true}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Work without handlers: %v, want ErrConfig", err)
		}
		if err := b.p.Work(b.ctx, WorkOptions{UntilEmpty: true, Handlers: map[string]claimcheck.Handler{"x": &recorder{}}}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Work with kind x: %v, want ErrConfig", err)
		}
	})
}

// 9. Listing a backlog pages through it; nothing loads it all.
func TestListLargeBacklog(t *testing.T) {
	t.Parallel()
	b := setup(t, &testOpts{store: claimcheck.Options{AlwaysOffload: true}})
	const n = 200
	var want []int64
	for i := range n {
		want = append(want, b.enqueue(t, "bulk", "acme", fmt.Appendf(nil, "payload %03d", i), nil).JobID)
	}
	var got []int64
	keys := make(map[string]bool)
	err := b.p.List(b.ctx, ListOptions{Kind: "bulk", State: "available", PageSize: 50}, func(j *JobInfo) error {
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

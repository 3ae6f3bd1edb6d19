package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
	_ "github.com/claimcheck/claimcheck/stores/s3store" // s3:// URLs
)

// idRecorder is a handler that reads each payload and its attachments and
// records the job ids it was called for.
type idRecorder struct {
	mu  sync.Mutex
	ids []int64
}

func (r *idRecorder) Handle(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
	id, _ := strconv.ParseInt(job.ID, 10, 64)
	r.mu.Lock()
	r.ids = append(r.ids, id)
	r.mu.Unlock()
	if job.Payload != nil {
		rc, err := job.Payload.Open(ctx)
		if err != nil {
			return nil, err
		}
		rc.Close()
	}
	for _, a := range job.Attachments {
		rc, err := a.Open(ctx)
		if err != nil {
			return nil, err
		}
		rc.Close()
	}
	// Above the inline threshold: the result is an object, in the job's
	// store.
	return &claimcheck.Result{Body: strings.NewReader("done " + job.ID + strings.Repeat(".", 70<<10)), ContentType: "text/plain"}, nil
}

func (r *idRecorder) got() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.ids)
	slices.Sort(out)
	return out
}

// TestNamedStoresPinWorkers (issue 16, must-show 3): two named stores, a
// file store "us" and SeaweedFS "eu" (CLAIMCHECK_TEST_S3_URL), beside the
// default store. A producer names the store of each job (the eu job's
// attachments go there too); a worker that has only eu works eu's jobs
// and never fetches the others (no outcome at all for them: they stay
// available, no attempt spent, not dead); a worker that has only us then
// completes us's, each result checked into its job's store; a job of the
// default store, enqueued in the queue named after its kind as before
// named stores existed, is left by both and completed by a default-store
// worker.
func TestNamedStoresPinWorkers(t *testing.T) {
	t.Parallel()
	raw := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", "scripts/seaweedfs.sh start && eval \"$(scripts/seaweedfs.sh env)\"")
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		ctx := t.Context()
		database := newDB(t)
		dir := t.TempDir()
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("prefix", "regionpin-"+hex.EncodeToString(rnd[:])+"/") // a namespace of this database's own
		u.RawQuery = q.Encode()
		open := func(name, storeURL string) *claimcheck.Store {
			t.Helper()
			st, err := claimcheck.OpenStore(ctx, storeURL, &claimcheck.Options{Name: name, SpoolDir: filepath.Join(dir, "spool")})
			if err != nil {
				t.Fatalf("OpenStore %s: %v", name, err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		defURL := "file://" + filepath.Join(dir, "default")
		usURL := "file://" + filepath.Join(dir, "us")
		pipe := func(stores ...*claimcheck.Store) *Pipeline {
			t.Helper()
			p, err := Open(ctx, Config{Database: database, Store: stores[0], Stores: stores[1:], Retry: claimcheck.RetryPolicy{Base: 10 * time.Millisecond}})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { p.Close() })
			return p
		}
		def, eu, us := open("", defURL), open("eu", u.String()), open("us", usURL)
		producer := pipe(def, eu, us)
		if n := len(producer.Stores()); n != 3 {
			t.Fatalf("producer has %d stores, want 3", n)
		}

		big := strings.Repeat("x", 100<<10) // offloaded: above the inline threshold
		euJob, err := producer.Enqueue(ctx, "docs", "acme", strings.NewReader("eu "+big), &EnqueueOptions{Store: "eu",
			Attachments: []Attachment{{Name: "label.pdf", Body: strings.NewReader("label")}, {Name: "invoice.pdf", Body: strings.NewReader("invoice")}}})
		if err != nil {
			t.Fatal(err)
		}
		usJob, err := producer.Enqueue(ctx, "docs", "acme", strings.NewReader("us "+big), &EnqueueOptions{Store: "us"})
		if err != nil {
			t.Fatal(err)
		}
		usInline, err := producer.Enqueue(ctx, "docs", "acme", strings.NewReader("small, inline"), &EnqueueOptions{Store: "us"})
		if err != nil {
			t.Fatal(err)
		}
		// A job of the default store as every job was before named stores:
		// inserted in the queue named after its kind.
		dt, err := producer.CheckIn(ctx, "acme", strings.NewReader("default "+big), nil)
		if err != nil {
			t.Fatal(err)
		}
		enc, _ := dt.Marshal()
		old, err := producer.client.Insert(ctx, jobArgs{JobKind: "docs", Tenant: "acme", Ticket: enc}, &river.InsertOpts{Queue: "docs"})
		if err != nil {
			t.Fatal(err)
		}
		defJob := old.Job.ID
		if err := jobdb.Register(ctx, producer.db, defJob, jobdb.RolePayload, dt); err != nil {
			t.Fatal(err)
		}

		if euJob.Ticket.Store != "eu" || usJob.Ticket.Store != "us" || !usInline.Ticket.IsInline() || dt.Store != claimcheck.DefaultStoreName {
			t.Fatalf("ticket stores: eu job %q, us job %q, us inline %v, default %q", euJob.Ticket.Store, usJob.Ticket.Store, usInline.Ticket.IsInline(), dt.Store)
		}
		m, err := eu.ReadManifest(ctx, euJob.Ticket)
		if err != nil {
			t.Fatalf("the eu job's manifest is not in eu: %v", err)
		}
		for _, d := range m.Tickets() {
			if info, err := eu.Stat(ctx, d); err != nil || !info.Exists || d.Store != "eu" {
				t.Fatalf("eu job's document %s: in store %q, exists in eu %v (%v)", d, d.Store, info.Exists, err)
			}
		}
		for id, want := range map[int64]string{euJob.JobID: "eu", usJob.JobID: "us", usInline.JobID: "us", defJob: ""} {
			if j, err := producer.Get(ctx, id); err != nil || j.Store != want {
				t.Fatalf("job %d: store %q (%v), want %q", id, j.Store, err, want)
			}
		}

		work := func(p *Pipeline) (*idRecorder, []Outcome) {
			t.Helper()
			h := &idRecorder{}
			var mu sync.Mutex
			var outs []Outcome
			wctx, cancel := context.WithTimeout(ctx, workTimeout)
			defer cancel()
			err := p.Work(wctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"docs": h}, UntilEmpty: true, OnDone: func(o Outcome) {
				mu.Lock()
				defer mu.Unlock()
				outs = append(outs, o)
			}})
			if err != nil {
				t.Fatalf("Work: %v", err)
			}
			return h, outs
		}
		pending := func(who string, ids ...int64) {
			t.Helper()
			for _, id := range ids {
				j, err := producer.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if j.State != "available" || j.Dead || j.Attempts != 0 {
					t.Fatalf("after %s: job %d (store %q) is %s, dead=%v, %d attempts; want available, never fetched", who, id, j.Store, j.State, j.Dead, j.Attempts)
				}
			}
		}
		completed := func(who string, st *claimcheck.Store, ids ...int64) {
			t.Helper()
			for _, id := range ids {
				j, err := producer.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if j.State != "completed" || j.Attempts != 1 || !j.HasResult {
					t.Fatalf("after %s: job %d is %s after %d attempts (result %v), want completed on attempt 1", who, id, j.State, j.Attempts, j.HasResult)
				}
				if rt := j.ResultTicket(); rt.IsInline() || rt.Store != st.Name() {
					t.Fatalf("job %d: its result is in store %q (inline %v), want %q", id, rt.Store, rt.IsInline(), st.Name())
				}
				if info, err := st.Stat(ctx, j.ResultTicket()); err != nil || !info.Exists {
					t.Fatalf("job %d: its result is not in store %s (%v)", id, st.Name(), err)
				}
			}
		}

		// The eu worker: eu only.
		h, outs := work(pipe(open("eu", u.String())))
		if got := h.got(); !slices.Equal(got, []int64{euJob.JobID}) {
			t.Fatalf("eu worker worked jobs %v, want [%d] only", got, euJob.JobID)
		}
		if len(outs) != 1 || outs[0].JobID != euJob.JobID || outs[0].State != JobCompleted {
			t.Fatalf("eu worker's outcomes %+v: want only job %d completed (the others never fetched)", outs, euJob.JobID)
		}
		completed("the eu worker", eu, euJob.JobID)
		pending("the eu worker", usJob.JobID, usInline.JobID, defJob)
		t.Logf("eu worker (store eu on %s): worked jobs %v, %d outcomes; jobs %d, %d (us) and %d (default) still available, 0 attempts, not dead",
			eu.Location(), h.got(), len(outs), usJob.JobID, usInline.JobID, defJob)

		// The us worker: us only.
		h, outs = work(pipe(open("us", usURL)))
		if got, want := h.got(), []int64{usJob.JobID, usInline.JobID}; !slices.Equal(got, want) || len(outs) != 2 {
			t.Fatalf("us worker worked jobs %v (outcomes %+v), want %v", got, outs, want)
		}
		completed("the us worker", us, usJob.JobID, usInline.JobID)
		pending("the us worker", defJob)
		t.Logf("us worker (store us on %s): worked jobs %v, completed on attempt 1, results in us; job %d (default) still available", us.Location(), h.got(), defJob)

		// The default store's worker takes the job enqueued the old way.
		h, _ = work(pipe(open("", defURL)))
		if got := h.got(); !slices.Equal(got, []int64{defJob}) {
			t.Fatalf("default worker worked jobs %v, want [%d]", got, defJob)
		}
		completed("the default worker", def, defJob)
		t.Logf("default worker: worked job %v (enqueued in queue %q, as before named stores)", h.got(), "docs")

		// Results read back from their stores, in a process that has them.
		for _, id := range []int64{euJob.JobID, usJob.JobID, defJob} {
			rc, _, err := producer.OpenResult(ctx, id)
			if err != nil {
				t.Fatalf("OpenResult(%d): %v", id, err)
			}
			rc.Close()
		}
		// ... and not in one that lacks the store.
		if _, _, err := pipe(open("us", usURL)).OpenResult(ctx, euJob.JobID); !errors.Is(err, ErrStoreNotConfigured) || !errors.Is(err, claimcheck.ErrConfig) {
			t.Fatalf("OpenResult of an eu job without eu: %v, want ErrStoreNotConfigured", err)
		}
	})
}

// TestNamedStoresConfig: store names and queue names are checked with
// clear errors, and a store the pipeline lacks is refused before anything
// is stored.
func TestNamedStoresConfig(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "EU", "eu_west", "eu--west", "-eu", "eu-", "a234567890123456x", "é"} {
		if err := ValidateStoreName(bad); err == nil {
			t.Errorf("ValidateStoreName(%q): nil, want an error", bad)
		}
	}
	for _, good := range []string{"eu", "eu-west-1", "a", "a23456789012345x", claimcheck.DefaultStoreName} {
		if err := ValidateStoreName(good); err != nil {
			t.Errorf("ValidateStoreName(%q): %v", good, err)
		}
	}
	if q, err := StoreQueue("", "pdf-info"); err != nil || q != "pdf-info" {
		t.Errorf("StoreQueue(default): %q, %v", q, err)
	}
	if q, err := StoreQueue("eu", "pdf-info"); err != nil || q != "claimcheck-store-eu_pdf-info" || queueStore(q) != "eu" {
		t.Errorf("StoreQueue(eu): %q, %v (store back %q)", q, err, queueStore(q))
	}
	long := strings.Repeat("k", 40)
	_, err := StoreQueue("eu-west-1-long", long)
	if err == nil || !strings.Contains(err.Error(), "River allows 64") || !strings.Contains(err.Error(), "at most 32 bytes") {
		t.Errorf("StoreQueue with a long kind: %v", err)
	}
	if err := ValidateKind("claimcheck-store-eu_docs"); err == nil {
		t.Error("ValidateKind accepts a named store's queue name")
	}

	database := filepath.Join(t.TempDir(), "jobs.db")
	def := openTestStore(t, claimcheck.Options{})
	eu := openTestStore(t, claimcheck.Options{Name: "eu"})
	for name, stores := range map[string][]*claimcheck.Store{
		"twice":      {eu, openTestStore(t, claimcheck.Options{Name: "eu"})},
		"underscore": {openTestStore(t, claimcheck.Options{Name: "eu_west"})},
		"nil":        {nil},
	} {
		_, err := Open(t.Context(), Config{Database: database, Store: def, Stores: stores})
		if !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Open with stores %s: %v, want ErrConfig", name, err)
		}
	}
	p, err := Open(t.Context(), Config{Database: database, Store: def, Stores: []*claimcheck.Store{eu}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Enqueue(t.Context(), "docs", "acme", strings.NewReader("x"), &EnqueueOptions{Store: "mars"})
	if !errors.Is(err, ErrStoreNotConfigured) || !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), `"mars"`) || !strings.Contains(err.Error(), "default, eu") {
		t.Errorf("Enqueue to an unknown store: %v", err)
	}
	_, err = p.Enqueue(t.Context(), "docs", "acme", strings.NewReader("x"), &EnqueueOptions{Store: "eu", CheckIn: claimcheck.CheckInOptions{}, IdempotencyKey: ""})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Enqueue(t.Context(), long+long[:10], "acme", strings.NewReader("x"), &EnqueueOptions{Store: "eu"})
	if !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("Enqueue of a kind too long for eu's queue: %v, want ErrConfig", err)
	}
	n := 0
	if err := p.List(t.Context(), ListOptions{}, func(*JobInfo) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("%d jobs (%v), want 1: refused enqueues wrote none", n, err)
	}
	// A ticket of eu's enqueued as another store's.
	tk, err := p.CheckInTo(t.Context(), "eu", "acme", strings.NewReader(strings.Repeat("y", 70<<10)), nil)
	if err != nil || tk.Store != "eu" {
		t.Fatalf("CheckInTo eu: %v, store %q", err, tk.Store)
	}
	tx, err := p.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.EnqueueTx(t.Context(), tx, "docs", tk, &EnqueueOptions{Store: "default"}); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("EnqueueTx of an eu ticket as the default store's: %v, want ErrConfig", err)
	}
	tx.Rollback()
	err = p.Work(t.Context(), WorkOptions{Handlers: map[string]claimcheck.Handler{"docs": &recorder{}}, Broker: &BrokerSource{}})
	if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "one worker per store") {
		t.Errorf("broker Work with two stores: %v, want ErrConfig", err)
	}
}

package sweep_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/pipeline"
)

// notFoundInjectingProxy is a fault-injecting reverse proxy in front of a
// real S3 server that plays an eventually consistent store (Ceph RGW,
// older MinIO, Garage): for window after an object is written (PutObject
// or CompleteMultipartUpload), its first reads GETs answer 404 NoSuchKey
// without reaching the server. HEADs and listings pass through.
type notFoundInjectingProxy struct {
	reads  int
	window time.Duration

	mu       sync.Mutex
	written  map[string]time.Time
	injected map[string]int
	total    int
}

func newNotFoundInjectingProxy(t *testing.T, target string, reads int, window time.Duration) (*notFoundInjectingProxy, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &notFoundInjectingProxy{reads: reads, window: window, written: map[string]time.Time{}, injected: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		object := strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1 // /bucket/key
		q := r.URL.Query()
		if object && r.Method == http.MethodGet && !q.Has("uploadId") && p.inject(r.URL.Path) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(rec, r)
		write := r.Method == http.MethodPut && !q.Has("partNumber") || r.Method == http.MethodPost && q.Has("uploadId")
		if object && write && rec.status == http.StatusOK {
			p.mu.Lock()
			p.written[r.URL.Path] = time.Now()
			p.mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *notFoundInjectingProxy) inject(path string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.written[path]
	if !ok || time.Since(at) > p.window || p.injected[path] >= p.reads {
		return false
	}
	p.injected[path]++
	p.total++
	return true
}

func (p *notFoundInjectingProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// A store answering NotFound for the first two reads within 1 s of the
// write: within the NotFound grace (2 minutes by default) after the
// ticket's creation the miss is transient (payload-not-visible-yet) and the
// job completes; a ticket created longer ago than the grace is dead on
// attempt 1 as payload-missing.
func TestEventuallyConsistentStore(t *testing.T) {
	raw := s3URL(t)
	u, _ := url.Parse(raw)
	proxy, endpoint := newNotFoundInjectingProxy(t, u.Query().Get("endpoint"), 2, time.Second)
	store := s3TestStoreVia(t, endpoint, &claimcheck.Options{AlwaysOffload: true, SpoolDir: t.TempDir()})
	ctx := t.Context()
	p, err := pipeline.Open(ctx, pipeline.Config{Database: dbtest.SQLite(t), Store: store, Retry: claimcheck.RetryPolicy{Base: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b := &bundle{ctx: ctx, store: store, pipe: p}

	var mu sync.Mutex
	var attempts []string
	done := func(o pipeline.Outcome) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, claimcheck.Reason(o.Err))
	}
	work := func(t *testing.T) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err := p.Work(wctx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{"ec": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return nil, nil
		})}, UntilEmpty: true, OnDone: done})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("WithinGrace", func(t *testing.T) {
		attempts = nil
		res, err := p.Enqueue(ctx, "ec", tenant, strings.NewReader(strings.Repeat("eventually consistent ", 100)), nil)
		if err != nil {
			t.Fatal(err)
		}
		work(t)
		j, err := p.Get(ctx, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("job %d %s after attempts %q; the proxy answered NotFound %d times", res.JobID, j.State, attempts, proxy.count())
		if j.State != "completed" || len(attempts) < 2 || attempts[0] != claimcheck.ReasonNotVisibleYet {
			t.Fatalf("job %d is %s after attempts %q, want completed after payload-not-visible-yet", res.JobID, j.State, attempts)
		}
	})

	t.Run("PastGrace", func(t *testing.T) {
		attempts = nil
		tk, err := p.CheckIn(ctx, tenant, strings.NewReader(strings.Repeat("checked in long ago ", 100)), nil)
		if err != nil {
			t.Fatal(err)
		}
		// As if checked in three minutes ago: past the 2-minute grace.
		tk.Created = tk.Created.Add(-3 * time.Minute)
		res, err := b.enqueueTxKind(tk, "ec")
		if err != nil {
			t.Fatal(err)
		}
		work(t)
		j, err := p.Get(ctx, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("job %d %s, reason %s, after attempts %q", res.JobID, j.State, j.Reason, attempts)
		if j.State != "cancelled" || j.Reason != claimcheck.ReasonPayloadMissing || len(attempts) != 1 {
			t.Fatalf("job %d is %s (%s) after attempts %q, want dead on attempt 1 as payload-missing", res.JobID, j.State, j.Reason, attempts)
		}
	})
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// TestServeQueueGauges: on a job database holding 210 dead letters (two
// kinds, two reasons), 40 jobs waiting for an unavailable store and 3
// available jobs with offloaded payloads, serve's /metrics shows
// claimcheck_queue_jobs, claimcheck_queue_dead_letters,
// claimcheck_queue_oldest_age_seconds and claimcheck_storage_held_* equal
// to what `claimcheck jobs` and `claimcheck dead` list.
func TestServeQueueGauges(t *testing.T) {
	t.Parallel()
	eachJobDatabase(t, func(t *testing.T, b *cliBundle, database []string) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		storeURL, dbURL := (&globals{}).locations(b.data)
		if len(database) == 2 {
			dbURL = database[1]
		}
		if err := os.MkdirAll(b.data, 0o700); err != nil {
			t.Fatal(err)
		}
		store, err := claimcheck.OpenStore(ctx, storeURL, &claimcheck.Options{SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		// Retry.Base of an hour: a waiting job is not tried again while the
		// test runs.
		p, err := pipeline.Open(ctx, pipeline.Config{Database: dbURL, Store: store, Retry: claimcheck.RetryPolicy{Base: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		start := time.Now()
		enqueue := func(kind, tenant string, n, size int) {
			for i := range n {
				body := fmt.Appendf(nil, "%s job %d ", kind, i)
				body = append(body, bytes.Repeat([]byte{'x'}, max(size-len(body), 0))...)
				if _, err := p.Enqueue(ctx, kind, tenant, bytes.NewReader(body), nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		enqueue("gauge-idle", "initech", 3, 100<<10) // offloaded: the registry holds them
		enqueue("gauge-a", "acme", 130, 64)
		enqueue("gauge-b", "globex", 80, 64)
		enqueue("gauge-wait", "acme", 40, 64)
		t.Logf("enqueued 253 jobs in %v", time.Since(start).Round(time.Millisecond))

		var mu sync.Mutex
		dead, waiting := 0, map[int64]bool{}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- p.Work(wctx, pipeline.WorkOptions{Concurrency: 4, Handlers: map[string]claimcheck.Handler{
				"gauge-a": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
					return nil, claimcheck.Permanent(errors.New("refused"))
				}),
				"gauge-b": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
					return nil, claimcheck.Permanent(fmt.Errorf("bad document: %w", claimcheck.ErrPayloadCorrupt))
				}),
				"gauge-wait": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
					return nil, fmt.Errorf("downstream store: %w", claimcheck.ErrUnavailable)
				}),
			}, OnDone: func(o pipeline.Outcome) {
				mu.Lock()
				defer mu.Unlock()
				switch o.State {
				case pipeline.JobDead:
					dead++
				case pipeline.JobWaiting:
					waiting[o.JobID] = true
				}
				if dead == 210 && len(waiting) == 40 {
					stop()
				}
			}})
		}()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("work: %v", err)
		}
		t.Logf("worked into %d dead letters and %d waiting jobs in %v", dead, len(waiting), time.Since(start).Round(time.Millisecond))
		if dead != 210 || len(waiting) != 40 {
			t.Fatalf("work stopped at %d dead, %d waiting", dead, len(waiting))
		}

		base := b.serveConsole("127.0.0.1:0", database...)
		t0 := time.Now()
		fams := scrape(t, base+"/metrics")
		t.Logf("first scrape (queries, no cache): %v", time.Since(t0).Round(time.Microsecond))

		// What the listings say.
		wantJobs, wantDead := map[string]float64{}, map[string]float64{}
		for _, j := range b.jobs(database...) {
			wantJobs[j.Kind+"/"+j.State]++
		}
		var deadList []jobJSON
		if err := json.Unmarshal([]byte(b.ok(append(database, "dead", "--json")...)), &deadList); err != nil {
			t.Fatal(err)
		}
		for _, j := range deadList {
			wantDead[j.Kind+"/"+j.Reason]++
		}
		got := func(name string, labels ...string) map[string]float64 {
			out := map[string]float64{}
			for _, m := range fams[name].GetMetric() {
				ls := map[string]string{}
				for _, l := range m.GetLabel() {
					ls[l.GetName()] = l.GetValue()
				}
				if !strings.HasPrefix(ls["claimcheck_kind"], "gauge-") && ls["claimcheck_tenant"] == "" {
					continue
				}
				var key []string
				for _, l := range labels {
					key = append(key, ls[l])
				}
				out[strings.Join(key, "/")] += m.GetGauge().GetValue()
			}
			return out
		}
		compare := func(name string, got, want map[string]float64) {
			t.Helper()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: %v\nthe listings: %v", name, got, want)
			} else {
				t.Logf("%s = the listings: %v", name, got)
			}
		}
		compare("claimcheck_queue_jobs", got("claimcheck_queue_jobs", "claimcheck_kind", "claimcheck_state"), wantJobs)
		compare("claimcheck_queue_dead_letters", got("claimcheck_queue_dead_letters", "claimcheck_kind", "claimcheck_reason"), wantDead)
		if want := map[string]float64{"gauge-a/handler-permanent": 130, "gauge-b/payload-corrupt": 80}; fmt.Sprint(wantDead) != fmt.Sprint(want) {
			t.Errorf("dead lists %v, want %v", wantDead, want)
		}
		if wantJobs["gauge-wait/waiting"] != 40 || wantJobs["gauge-idle/available"] != 3 {
			t.Errorf("jobs lists %v, want 40 waiting and 3 available", wantJobs)
		}
		ages := got("claimcheck_queue_oldest_age_seconds", "claimcheck_kind")
		elapsed := time.Since(start).Seconds()
		for _, kind := range []string{"gauge-idle", "gauge-wait"} {
			if a := ages[kind]; a <= 0 || a > elapsed+1 {
				t.Errorf("claimcheck_queue_oldest_age_seconds{kind=%q} = %v, want in (0, %.1f]", kind, a, elapsed+1)
			}
		}
		if ages["gauge-a"] != 0 || ages["gauge-b"] != 0 {
			t.Errorf("claimcheck_queue_oldest_age_seconds of kinds with nothing to work: %v, want 0", ages)
		}
		t.Logf("claimcheck_queue_oldest_age_seconds: %v (enqueueing began %.2f s ago)", ages, elapsed)
		held := got("claimcheck_storage_held_bytes", "claimcheck_tenant", "claimcheck_role")
		objects := got("claimcheck_storage_held_objects", "claimcheck_tenant", "claimcheck_role")
		if held["initech/payload"] != 3*100<<10 || objects["initech/payload"] != 3 || held["acme/payload"] != 0 {
			t.Errorf("claimcheck_storage_held_bytes %v, _objects %v: want initech/payload 307200 bytes in 3 objects, no acme object (inline)", held, objects)
		} else {
			t.Logf("claimcheck_storage_held_bytes %v, claimcheck_storage_held_objects %v", held, objects)
		}
		t0 = time.Now()
		scrape(t, base+"/metrics")
		t.Logf("second scrape (cached): %v", time.Since(t0).Round(time.Microsecond))
	})
}

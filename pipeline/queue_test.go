package pipeline

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// gaugeClock is a clock a test moves (Pipeline.gaugeNow).
type gaugeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *gaugeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *gaugeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// gaugeBundle is a pipeline whose store records metrics into a manual
// reader, its gauges on a clock of the test's.
func gaugeBundle(t *testing.T, database string) (*testBundle, *metric.ManualReader, *gaugeClock) {
	t.Helper()
	reader := metric.NewManualReader()
	mp := metric.NewMeterProvider(metric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	b := setup(t, database, &testOpts{store: claimcheck.Options{MeterProvider: mp}})
	clock := &gaugeClock{t: time.Now()}
	b.p.gaugeNow = clock.now
	return b, reader, clock
}

// gaugeValue is the int64 gauge name's value for the attributes want
// ("key=value" each), -1 when there is no such series.
func gaugeValue(t *testing.T, reader *metric.ManualReader, name string, want ...string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[int64])
			if m.Name != name || !ok {
				continue
			}
		next:
			for _, dp := range g.DataPoints {
				for _, w := range want {
					k, v, _ := strings.Cut(w, "=")
					if got, _ := dp.Attributes.Value(attribute.Key(k)); got.AsString() != v {
						continue next
					}
				}
				return dp.Value
			}
		}
	}
	return -1
}

// TestQueueGaugesCached: the queue gauges read the job database at most
// once per QueueStatsCachePeriod and the registry's sums once per
// StorageCachePeriod, by the gauges' clock: a job enqueued after a
// collection shows only once the period has passed.
func TestQueueGaugesCached(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b, reader, clock := gaugeBundle(t, newDB(t))
		enqueue := func(size int) {
			if _, err := b.p.Enqueue(b.ctx, "cached", "acme", strings.NewReader(strings.Repeat("x", size)+time.Now().String()), nil); err != nil {
				t.Fatal(err)
			}
		}
		jobs := func() int64 {
			return gaugeValue(t, reader, "claimcheck.queue.jobs", "claimcheck.kind=cached", "claimcheck.state=available")
		}
		held := func() int64 {
			return gaugeValue(t, reader, "claimcheck.storage.held_objects", "claimcheck.tenant=acme", "claimcheck.role=payload")
		}
		enqueue(100 << 10) // offloaded
		if n, o := jobs(), held(); n != 1 || o != 1 {
			t.Fatalf("first collection: %d jobs, %d objects, want 1 and 1", n, o)
		}
		enqueue(100 << 10)
		clock.add(QueueStatsCachePeriod - time.Millisecond)
		if n, o := jobs(), held(); n != 1 || o != 1 {
			t.Errorf("within the cache period: %d jobs, %d objects, want the cached 1 and 1", n, o)
		}
		// Past the period, a collection still answers at once with what
		// it has, and reads again in the background.
		clock.add(time.Millisecond)
		if n, o := jobs(), held(); n != 1 || o != 1 {
			t.Errorf("the collection that finds the reading %v old: %d jobs, %d objects, want the cached 1 and 1", QueueStatsCachePeriod, n, o)
		}
		eventually(t, func() bool { return jobs() == 2 }, "claimcheck.queue.jobs to read 2")
		if o := held(); o != 1 {
			t.Errorf("within %v: %d objects, want the cached 1", StorageCachePeriod, o)
		}
		clock.add(StorageCachePeriod)
		held()
		eventually(t, func() bool { return held() == 2 }, "claimcheck.storage.held_objects to read 2")
	})
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestQueueStatsScale measures what a /metrics scrape costs the job
// database on PostgreSQL with 100,000 jobs (1 KiB of arguments each; 90%
// completed, 5% available, 3% dead, 2% waiting) and 100,000 registry
// rows: QueueStats (before and after VACUUM), StorageByTenant, the first
// collection of the pipeline's gauges (which waits for all three), and
// later collections with the caches expired and fresh, 7 times each
// (median, min, max); a collection's median must stay under 100 ms.
func TestQueueStatsScale(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	b, reader, clock := gaugeBundle(t, dbtest.Postgres(t))
	res, err := b.p.Enqueue(b.ctx, "scale-a", "tenant-0", strings.NewReader(strings.Repeat("x", 700)), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const n = 100_000
	if _, err := b.p.DB().ExecContext(b.ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, created_at, scheduled_at, finalized_at, errors, metadata)
		SELECT (SELECT args FROM river_job WHERE id = $1), 'claimcheck', 25, CASE WHEN g % 10 < 6 THEN 'scale-a' ELSE 'scale-b' END, st::river_job_state,
			CASE WHEN st IN ('completed', 'cancelled') THEN 1 ELSE 0 END,
			now() - make_interval(secs => g), now() - make_interval(secs => g) + CASE WHEN st = 'scheduled' THEN interval '1 hour' ELSE interval '0' END,
			CASE WHEN st IN ('completed', 'cancelled') THEN now() ELSE NULL END,
			CASE WHEN st = 'cancelled' THEN ARRAY[jsonb_build_object('at', now(), 'attempt', 1, 'error', 'JobCancelError: handler-permanent: refused', 'trace', '')] ELSE NULL END,
			CASE WHEN st = 'scheduled' THEN jsonb_build_object('output', jsonb_build_object('unavailable_since', now(), 'wait_reason', 'store-unavailable'))
				ELSE '{}'::jsonb END
		FROM (SELECT g, CASE WHEN g % 100 < 90 THEN 'completed' WHEN g % 100 < 95 THEN 'available' WHEN g % 100 < 98 THEN 'cancelled' ELSE 'scheduled' END AS st
			FROM generate_series(1, $2::int) g) s`, res.JobID, n); err != nil {
		t.Fatal(err)
	}
	if _, err := b.p.DB().ExecContext(b.ctx, `INSERT INTO claimcheck_claim (job_id, role, object_key, sha256, size, tenant, created_at)
		SELECT g + 1000000, 'payload', 'payloads/tenant-' || (g % 10) || '/' || md5(g::text), md5(g::text) || md5(g::text), 100000 + g % 1000, 'tenant-' || (g % 10), now()
		FROM generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted %d jobs and %d registry rows in %v", n, n, time.Since(start).Round(time.Millisecond))

	kinds, err := b.p.QueueStats(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total, dead int64
	for _, k := range kinds {
		for _, c := range k.States {
			total += c
		}
		for _, c := range k.Dead {
			dead += c
		}
	}
	if total != n+1 || dead != n*3/100 {
		t.Fatalf("QueueStats: %d jobs, %d dead, want %d and %d: %+v", total, dead, n+1, n*3/100, kinds)
	}
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	measure := func(what string, fn func() error) time.Duration {
		var ds []time.Duration
		for range 7 {
			t0 := time.Now()
			if err := fn(); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		t.Logf("%s over %d jobs: median %v, min %v, max %v (7 runs; load average %s)", what, n,
			ds[3].Round(10*time.Microsecond), ds[0].Round(10*time.Microsecond), ds[6].Round(10*time.Microsecond), load())
		return ds[3]
	}
	collect := func() error {
		var rm metricdata.ResourceMetrics
		return reader.Collect(b.ctx, &rm)
	}
	t0 := time.Now()
	if err := collect(); err != nil {
		t.Fatal(err)
	}
	t.Logf("first collection (reads the job database and the registry, nothing cached yet): %v (load average %s)", time.Since(t0).Round(10*time.Microsecond), load())
	measure("QueueStats, table not vacuumed", func() error { _, err := b.p.QueueStats(b.ctx); return err })
	// As autovacuum leaves it: the visibility map set, so the count by
	// state and queue reads River's fetch index alone.
	if _, err := b.p.DB().ExecContext(b.ctx, `VACUUM ANALYZE river_job`); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CLAIMCHECK_TEST_EXPLAIN") != "" {
		jobsSQL, pendingSQL, deadSQL := b.p.jobs.QueueStatements()
		for _, q := range []string{jobsSQL, pendingSQL, deadSQL, `SELECT tenant, role, COUNT(*), COALESCE(SUM(size), 0)
		FROM (SELECT DISTINCT tenant, role, object_key, size FROM claimcheck_claim) objects GROUP BY tenant, role`} {
			rows, err := b.p.DB().QueryContext(b.ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				_ = rows.Scan(&line)
				plan = append(plan, line)
			}
			rows.Close()
			t.Logf("%s\n%s", q, strings.Join(plan, "\n"))
		}
	}
	measure("QueueStats, table vacuumed", func() error { _, err := b.p.QueueStats(b.ctx); return err })
	measure("StorageByTenant", func() error { _, err := b.p.StorageByTenant(b.ctx); return err })
	// A scrape: the target is 100 ms.
	for what, d := range map[string]time.Duration{
		"collection, caches expired (read again in the background)": measure("collection, caches expired (read again in the background)", func() error {
			clock.add(StorageCachePeriod)
			return collect()
		}),
		"collection, caches fresh": measure("collection, caches fresh", collect),
	} {
		if d > 100*time.Millisecond {
			t.Errorf("%s: median %v, target < 100 ms", what, d)
		}
	}
}

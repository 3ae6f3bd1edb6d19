package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/pipeline"
	_ "github.com/claimcheck/claimcheck/stores/s3store" // s3:// URLs
	"github.com/claimcheck/claimcheck/sweep"
)

const (
	day    = 24 * time.Hour
	tenant = "acme"
)

// bundle is a file store and a job database, both real, in a temporary
// directory.
type bundle struct {
	ctx     context.Context
	objects string
	store   *claimcheck.Store
	pipe    *pipeline.Pipeline
}

func setup(t *testing.T, database string) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	b := &bundle{ctx: ctx, objects: filepath.Join(dir, "objects")}
	var err error
	b.store, err = claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(b.objects), &claimcheck.Options{AlwaysOffload: true, SpoolDir: filepath.Join(dir, "spool")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.store.Close() })
	if database == "" {
		database = filepath.Join(dir, "jobs.db")
	}
	b.pipe, err = pipeline.Open(ctx, pipeline.Config{Database: database, Store: b.store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.pipe.Close() })
	return b
}

// databases runs fn on SQLite and, when CLAIMCHECK_TEST_DATABASE_URL is
// set, on PostgreSQL.
func databases(t *testing.T, fn func(t *testing.T, b *bundle)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, setup(t, "")) })
	t.Run("postgres", func(t *testing.T) { fn(t, setup(t, dbtest.Postgres(t))) })
}

// checkIn stores body with no job: what a producer leaves when it crashes
// between the upload and the transaction.
func (b *bundle) checkIn(t *testing.T, body string, result bool) string {
	t.Helper()
	tk, err := b.store.CheckIn(b.ctx, tenant, strings.NewReader(body), &claimcheck.CheckInOptions{Result: result})
	if err != nil {
		t.Fatal(err)
	}
	return tk.Key
}

func (b *bundle) enqueue(t *testing.T, kind, body string) (int64, string) {
	t.Helper()
	res, err := b.pipe.Enqueue(b.ctx, kind, tenant, strings.NewReader(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.JobID, res.Ticket.Key
}

func (b *bundle) work(t *testing.T, kind string, h claimcheck.HandlerFunc) {
	t.Helper()
	if err := b.pipe.Work(b.ctx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{kind: h}, UntilEmpty: true}); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) state(t *testing.T, id int64) string {
	t.Helper()
	j, err := b.pipe.Get(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return j.State
}

// prune deletes a job's River row, as River's pruning of old dead letters
// and completed jobs does; the registry row stays.
func (b *bundle) prune(t *testing.T, id int64) {
	t.Helper()
	if _, err := b.pipe.DB().ExecContext(b.ctx, `DELETE FROM river_job WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pipe.Get(b.ctx, id); !errors.Is(err, pipeline.ErrJobNotFound) {
		t.Fatalf("job %d still there after pruning: %v", id, err)
	}
}

func (b *bundle) path(key string) string { return filepath.Join(b.objects, filepath.FromSlash(key)) }

// backdate makes an object (and its fileblob sidecar, if any) age old.
func (b *bundle) backdate(t *testing.T, key string, age time.Duration) {
	t.Helper()
	when := time.Now().Add(-age)
	if err := os.Chtimes(b.path(key), when, when); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(b.path(key)+".attrs", when, when); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

func (b *bundle) exists(t *testing.T, key string) bool {
	t.Helper()
	ok, err := b.store.Bucket().Exists(b.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(b.path(key))
	if ok != (statErr == nil) {
		t.Fatalf("bucket and file system disagree about %s", key)
	}
	return ok
}

func (b *bundle) sweep(t *testing.T, opts sweep.Options) *sweep.Report {
	t.Helper()
	opts.Store, opts.DB = b.store, b.pipe.DB()
	rep, err := sweep.Sweep(b.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// decisions maps each entry's key to "removed <reason>" or "kept <reason>".
func decisions(rep *sweep.Report) map[string]string {
	out := map[string]string{}
	for _, e := range rep.Entries {
		verb := "kept"
		if e.Removed {
			verb = "removed"
		}
		out[e.Key] = verb + " " + string(e.Reason)
	}
	return out
}

// logReport writes the report as the sweep command prints it.
func logReport(t *testing.T, title string, rep *sweep.Report) {
	t.Helper()
	var b strings.Builder
	for _, e := range rep.Entries {
		verb := "kept"
		if e.Removed {
			verb = "removed"
			if rep.DryRun {
				verb = "would remove"
			}
		}
		fmt.Fprintf(&b, "  %-12s %-12s %-34s %s\n", verb, e.Reason, e.Object, e.Detail)
	}
	fmt.Fprintf(&b, "  listed %d, removed %d (%d B), kept %d; pages %d, registry queries %d", rep.Listed, rep.Removed, rep.RemovedBytes, rep.Kept, rep.Pages, rep.Queries)
	t.Logf("%s:\n%s", title, b.String())
}

// The figure: a store holding (a) an orphan older than the grace
// period, (b) an orphan younger than it, (c) a queued job's payload, (d) a
// dead letter's payload whose River row has been pruned, (e) a temporary
// file and (f) an object under another prefix: exactly (a) is deleted.
func TestSweepScenario(t *testing.T) {
	databases(t, func(t *testing.T, b *bundle) {
		const old = 2 * day // well past the 24h grace period
		a := b.checkIn(t, "(a) orphan: uploaded, then the producer crashed before its transaction", false)
		b.backdate(t, a, old)
		bKey := b.checkIn(t, "(b) young orphan: its transaction may still commit", false)
		b.backdate(t, bKey, time.Hour)
		_, c := b.enqueue(t, "queued", "(c) a queued job's payload, never worked")
		b.backdate(t, c, old)
		dID, d := b.enqueue(t, "fails", "(d) a dead letter's payload")
		b.work(t, "fails", func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return nil, claimcheck.Permanent(errors.New("cannot process this"))
		})
		if st := b.state(t, dID); st != "cancelled" {
			t.Fatalf("job (d) is %s, want cancelled (dead)", st)
		}
		b.prune(t, dID)
		b.backdate(t, d, 30*day)
		// (e) fileblob's temporary file beside the final path
		// (<path>.<nanoseconds in hex>.tmp), old: a crashed or very long write.
		e := bKey + "." + fmt.Sprintf("%x", time.Now().UnixNano()) + ".tmp"
		if err := os.WriteFile(b.path(e), []byte("partial upload"), 0o600); err != nil {
			t.Fatal(err)
		}
		b.backdate(t, e, old)
		// (e2) a temporary file of a write in flight: young, kept.
		e2 := c + "." + fmt.Sprintf("%x", time.Now().UnixNano()) + ".tmp"
		if err := os.WriteFile(b.path(e2), []byte("upload in flight"), 0o600); err != nil {
			t.Fatal(err)
		}
		f := "other/team-report.csv"
		if err := b.store.Bucket().WriteAll(b.ctx, f, []byte("someone else's object"), nil); err != nil {
			t.Fatal(err)
		}
		b.backdate(t, f, 300*day)

		want := map[string]string{
			a:        "removed orphan",
			bKey:     "kept too-young",
			c:        "kept referenced",
			d:        "kept referenced",
			e:        "removed temp-file",
			e2:       "kept temp-file",
			"other/": "kept other-prefix",
		}
		check := func(t *testing.T, rep *sweep.Report) {
			t.Helper()
			if got := decisions(rep); !equalMaps(got, want) {
				t.Errorf("decisions:\n%s\nwant:\n%s", fmtMap(got), fmtMap(want))
			}
			if rep.Removed != 2 || rep.Kept != 5 || rep.Listed != 6 || rep.ByReason[sweep.Orphan] != 1 || rep.RemovedByReason[sweep.TempFile] != 1 {
				t.Errorf("removed %d kept %d listed %d by reason %v", rep.Removed, rep.Kept, rep.Listed, rep.ByReason)
			}
			for _, en := range rep.Entries {
				switch en.Key {
				case c:
					if en.Refs == nil || en.Refs.Pending != 1 {
						t.Errorf("(c) refs %+v, want 1 pending job", en.Refs)
					}
				case d:
					if en.Refs == nil || en.Refs.Pruned != 1 || en.Refs.Job != dID || !strings.Contains(en.Detail, "pruned by River") {
						t.Errorf("(d) refs %+v detail %q, want job %d pruned", en.Refs, en.Detail, dID)
					}
				}
				if strings.Contains(en.Object, strings.TrimPrefix(en.Key, "payloads/"+tenant+"/")) && en.Reason != sweep.OtherPrefix {
					t.Errorf("entry shows the full key: %q", en.Object)
				}
			}
		}

		dry := b.sweep(t, sweep.Options{DryRun: true})
		logReport(t, "dry run", dry)
		check(t, dry)
		for _, k := range []string{a, bKey, c, d, e, e2, f} {
			if !b.exists(t, k) {
				t.Fatalf("the dry run deleted %s", k)
			}
		}

		rep := b.sweep(t, sweep.Options{})
		logReport(t, "sweep", rep)
		check(t, rep)
		if b.exists(t, a) {
			t.Error("(a) the old orphan is still there")
		}
		if _, err := os.Stat(b.path(a) + ".attrs"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("(a)'s sidecar is still there: %v", err)
		}
		for _, k := range []string{bKey, c, d, e2, f} {
			if !b.exists(t, k) {
				t.Errorf("%s was deleted", k)
			}
		}
		if b.exists(t, e) {
			t.Error("(e) the old temporary file is still there")
		}

		again := b.sweep(t, sweep.Options{})
		if again.Removed != 0 || decisions(again)[a] != "" {
			t.Errorf("a second sweep removed %d objects, saw (a): %q", again.Removed, decisions(again)[a])
		}
	})
}

// Expiry, for stores without a lifecycle engine: objects older than their
// prefix's expiry go, unless a pending or dead job still refers to them.
func TestSweepExpiry(t *testing.T) {
	databases(t, func(t *testing.T, b *bundle) {
		done := func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return &claimcheck.Result{Body: strings.NewReader("result of " + time.Now().String()), ContentType: "text/plain"}, nil
		}
		id1, completedOld := b.enqueue(t, "done", "completed 30 days ago")
		id2, completedNew := b.enqueue(t, "done", "completed 10 days ago")
		b.work(t, "done", done)
		resultKey := func(id int64) string {
			j, err := b.pipe.Get(b.ctx, id)
			if err != nil || j.ResultTicket() == nil || j.State != "completed" {
				t.Fatalf("job %d: %v, no result", id, err)
			}
			return j.ResultTicket().Key
		}
		result, newResult := resultKey(id1), resultKey(id2)
		_, queued := b.enqueue(t, "queued", "queued for 30 days")
		deadID, dead := b.enqueue(t, "fails", "dead for 30 days, not pruned yet")
		prunedID, pruned := b.enqueue(t, "fails", "dead, then pruned by River")
		b.work(t, "fails", func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return nil, claimcheck.Permanent(errors.New("no"))
		})
		if st := b.state(t, deadID); st != "cancelled" {
			t.Fatalf("job %d is %s, want cancelled", deadID, st)
		}
		b.prune(t, prunedID)
		for _, k := range []string{completedOld, queued, dead, pruned} {
			b.backdate(t, k, 30*day)
		}
		b.backdate(t, completedNew, 10*day)
		b.backdate(t, result, 30*day)

		opts := sweep.Options{Expiry: map[string]time.Duration{claimcheck.PrefixPayloads: 22 * day, claimcheck.PrefixResults: 60 * day}}
		rep := b.sweep(t, opts)
		logReport(t, "expiry 22d/60d", rep)
		want := map[string]string{
			completedOld: "removed expired",
			completedNew: "kept referenced",
			queued:       "kept referenced",
			dead:         "kept referenced",
			pruned:       "removed expired",
			result:       "kept referenced",
			newResult:    "kept referenced",
		}
		if got := decisions(rep); !equalMaps(got, want) {
			t.Errorf("decisions:\n%s\nwant:\n%s", fmtMap(got), fmtMap(want))
		}
		for k, w := range want {
			if b.exists(t, k) != strings.HasPrefix(w, "kept") {
				t.Errorf("%s: %s, but exists = %v", k, w, !strings.HasPrefix(w, "kept"))
			}
		}

		b.backdate(t, result, 61*day)
		rep = b.sweep(t, opts)
		if got := decisions(rep)[result]; got != "removed expired" {
			t.Errorf("a 61-day-old result with a 60-day expiry: %q", got)
		}
		if b.exists(t, result) {
			t.Error("the expired result is still there")
		}
	})
}

// TestSweepPointerCopies: per-message pointer copies
// (claimcheck.Store.CopyForPointer) have no registry row; the sweep keeps
// them within the pointer retention, however far past the orphans' grace
// period, and removes them after it. The job's own object, which the copies
// came from, is untouched.
func TestSweepPointerCopies(t *testing.T) {
	databases(t, func(t *testing.T, b *bundle) {
		_, shared := b.enqueue(t, "queued", "a payload some AWS-format consumers are also pointed at")
		tk, err := b.store.CheckIn(b.ctx, tenant, strings.NewReader("a payload some AWS-format consumers are also pointed at"), nil)
		if err != nil || tk.Key != shared {
			t.Fatalf("check-in of the same bytes: %v (key shared: %v)", err, err == nil && tk.Key == shared)
		}
		var copies []string
		for range 3 {
			k, err := b.store.CopyForPointer(b.ctx, tk)
			if err != nil {
				t.Fatal(err)
			}
			if !claimcheck.PointerKey(k) {
				t.Fatalf("CopyForPointer's key is not a pointer key")
			}
			copies = append(copies, k)
		}
		b.backdate(t, copies[0], 13*day)
		b.backdate(t, copies[1], 15*day)
		b.backdate(t, shared, 15*day)
		rep := b.sweep(t, sweep.Options{})
		logReport(t, "default pointer retention (14 days)", rep)
		want := map[string]string{
			shared:    "kept referenced",
			copies[0]: "kept pointer-copy",
			copies[1]: "removed pointer-copy",
			copies[2]: "kept pointer-copy",
		}
		if got := decisions(rep); !equalMaps(got, want) {
			t.Errorf("decisions:\n%s\nwant:\n%s", fmtMap(got), fmtMap(want))
		}
		for k, w := range want {
			if b.exists(t, k) != strings.HasPrefix(w, "kept") {
				t.Errorf("%s: %s, but exists = %v", sweep.RedactKey(k), w, !strings.HasPrefix(w, "kept"))
			}
		}
		rep = b.sweep(t, sweep.Options{PointerRetention: 12 * day})
		if got := decisions(rep)[copies[0]]; got != "removed pointer-copy" {
			t.Errorf("a 13-day-old copy with a 12-day pointer retention: %q", got)
		}
		if _, err := sweep.Sweep(b.ctx, sweep.Options{Store: b.store, DB: b.pipe.DB(), PointerRetention: time.Hour, Grace: 2 * time.Hour}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("a pointer retention below the grace period: %v", err)
		}
	})
}

// Work in pages: PageSize 2 over 7 objects gives the same decisions as one
// page, one registry query per page.
func TestSweepPages(t *testing.T) {
	b := setup(t, "")
	keys := map[string]string{}
	for i := range 4 {
		_, k := b.enqueue(t, "queued", fmt.Sprintf("job payload %d", i))
		keys[k] = "kept referenced"
	}
	for i := range 2 {
		k := b.checkIn(t, fmt.Sprintf("old orphan %d", i), false)
		b.backdate(t, k, 3*day)
		keys[k] = "removed orphan"
	}
	k := b.checkIn(t, "old orphan result", true)
	b.backdate(t, k, 3*day)
	keys[k] = "removed orphan"

	one := b.sweep(t, sweep.Options{DryRun: true})
	// Pages: one each for payloads/, results/ and outcomes/ (empty);
	// registry queries: one per page that held objects to look up.
	if one.Pages != 3 || one.Queries != 2 {
		t.Errorf("default page size: %d pages, %d queries, want 3 pages (payloads/, results/, outcomes/) and 2 queries", one.Pages, one.Queries)
	}
	var streamed []sweep.Entry
	rep := b.sweep(t, sweep.Options{PageSize: 2, OnEntry: func(e sweep.Entry) error { streamed = append(streamed, e); return nil }})
	if len(rep.Entries) != 0 {
		t.Errorf("with OnEntry the report kept %d entries", len(rep.Entries))
	}
	rep.Entries = streamed
	logReport(t, "page size 2", rep)
	if got := decisions(rep); !equalMaps(got, keys) || !equalMaps(got, decisions(one)) {
		t.Errorf("decisions:\n%s\nwant:\n%s", fmtMap(got), fmtMap(keys))
	}
	// 6 payloads in pages of 2, 1 result: at least 4 pages, one query each
	// (a store may end with an empty page, which needs no query).
	if rep.Pages < 4 || rep.Queries < 4 || rep.Queries > rep.Pages {
		t.Errorf("%d pages and %d registry queries for 7 objects in pages of 2", rep.Pages, rep.Queries)
	}
	if rep.Listed != 7 || rep.Removed != 3 {
		t.Errorf("listed %d, removed %d; want 7 and 3", rep.Listed, rep.Removed)
	}
}

// A registry with no row at all most likely means the wrong database: every
// object would be an orphan.
func TestSweepRefusesEmptyRegistry(t *testing.T) {
	b := setup(t, "")
	k := b.checkIn(t, "an orphan in a store whose database was never used", false)
	b.backdate(t, k, 3*day)
	for _, dry := range []bool{true, false} {
		_, err := sweep.Sweep(b.ctx, sweep.Options{Store: b.store, DB: b.pipe.DB(), DryRun: dry})
		if !errors.Is(err, sweep.ErrEmptyRegistry) {
			t.Errorf("dry run %v: %v, want ErrEmptyRegistry", dry, err)
		}
	}
	if !b.exists(t, k) {
		t.Fatal("deleted despite the refusal")
	}
	rep := b.sweep(t, sweep.Options{AllowEmptyRegistry: true})
	if rep.Removed != 1 || b.exists(t, k) {
		t.Errorf("with AllowEmptyRegistry: removed %d", rep.Removed)
	}
}

func TestSweepOptionErrors(t *testing.T) {
	b := setup(t, "")
	for _, tc := range []struct {
		name string
		opts sweep.Options
		want string
	}{
		{"short grace", sweep.Options{Grace: time.Minute}, "below the minimum"},
		{"whole store", sweep.Options{Prefixes: []string{"/"}}, "must be a folder"},
		{"no slash", sweep.Options{Prefixes: []string{"payloads"}}, "must be a folder"},
		{"overlap", sweep.Options{Prefixes: []string{"payloads/", "payloads/acme/"}}, "overlap"},
		{"page size", sweep.Options{PageSize: 20000}, "page size"},
		{"negative page size", sweep.Options{PageSize: -1}, "page size"},
		{"expiry below grace", sweep.Options{Expiry: map[string]time.Duration{"payloads/": time.Hour}}, "shorter than the grace period"},
		{"expiry elsewhere", sweep.Options{Expiry: map[string]time.Duration{"logs/": 30 * day}}, "not under a swept prefix"},
	} {
		opts := tc.opts
		opts.Store, opts.DB = b.store, b.pipe.DB()
		_, err := sweep.Sweep(b.ctx, opts)
		if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrConfig with %q", tc.name, err, tc.want)
		}
	}
	if _, err := sweep.Sweep(b.ctx, sweep.Options{Store: b.store}); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("no database: %v", err)
	}
}

func TestRedactKey(t *testing.T) {
	t.Parallel()
	digest := strings.Repeat("3f2a9c1b7d4e", 5) + "abcd"
	for _, tc := range []struct{ key, want string }{
		{"payloads/acme/3f/" + digest, "payloads/acme/…3f2a9c1b7d4e"},
		{"results/acme/3f/" + digest, "results/acme/…3f2a9c1b7d4e"},
		{"payloads/acme/3f/" + digest + ".18a2b3c4d5e6f708.tmp", "payloads/acme/…3f2a9c1b7d4e.tmp"},
		{"payloads/acme/3f/" + digest + ".attrs", "payloads/acme/…3f2a9c1b7d4e.attrs"},
	} {
		if got := sweep.RedactKey(tc.key); got != tc.want {
			t.Errorf("RedactKey(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
	for _, key := range []string{"payloads/acme/named/invoice-42.pdf@v2", "payloads/NotATenant/x", "other/secret-name.csv", "toplevel-secret"} {
		got := sweep.RedactKey(key)
		if !strings.Contains(got, "…#") || strings.Contains(got, "invoice") || strings.Contains(got, "secret") || strings.Contains(got, "NotATenant") {
			t.Errorf("RedactKey(%q) = %q: shows a name", key, got)
		}
		if got != sweep.RedactKey(key) || got == sweep.RedactKey(key+"x") {
			t.Errorf("RedactKey(%q) is not a stable, distinguishing handle", key)
		}
	}
	if got := sweep.RedactKey("payloads/acme/named/invoice"); !strings.HasPrefix(got, "payloads/acme/…#") {
		t.Errorf("named key redacts to %q, want the tenant prefix kept", got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func fmtMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-20s %s\n", m[k], k)
	}
	return b.String()
}

// The sweep on a real S3 server (SeaweedFS: scripts/seaweedfs.sh), in a
// bucket of its own, skipped when CLAIMCHECK_TEST_S3_URL is unset. S3 cannot
// backdate an object, so the sweep's clock runs two days ahead instead:
// every object looks two days old. Pages of 2 exercise S3's continuation
// tokens.
func TestSweepS3(t *testing.T) {
	ctx := context.Background()
	store := s3TestStore(t, &claimcheck.Options{AlwaysOffload: true, SpoolDir: t.TempDir()})
	pipe, err := pipeline.Open(ctx, pipeline.Config{Database: filepath.Join(t.TempDir(), "jobs.db"), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Close()
	b := &bundle{ctx: ctx, store: store, pipe: pipe}

	a := b.checkIn(t, "(a) orphan on S3", false)
	a2 := b.checkIn(t, "(a2) orphan result on S3", true)
	var kept []string
	for i := range 3 {
		_, k := b.enqueue(t, "queued", fmt.Sprintf("(c) queued payload %d on S3", i))
		kept = append(kept, k)
	}
	dID, d := b.enqueue(t, "fails", "(d) dead letter on S3")
	b.work(t, "fails", func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
		return nil, claimcheck.Permanent(errors.New("no"))
	})
	b.prune(t, dID)
	kept = append(kept, d)
	f := "other/on-s3.txt"
	if err := store.Bucket().WriteAll(ctx, f, []byte("not ours"), nil); err != nil {
		t.Fatal(err)
	}

	ahead := func() time.Time { return time.Now().Add(2 * day) }
	dry := b.sweep(t, sweep.Options{DryRun: true, Now: ahead, PageSize: 2})
	rep := b.sweep(t, sweep.Options{Now: ahead, PageSize: 2})
	logReport(t, "S3, clock two days ahead, pages of 2", rep)
	want := map[string]string{a: "removed orphan", a2: "removed orphan", "other/": "kept other-prefix"}
	for _, k := range kept {
		want[k] = "kept referenced"
	}
	if got := decisions(rep); !equalMaps(got, want) || !equalMaps(decisions(dry), want) {
		t.Errorf("decisions:\n%s\nwant:\n%s", fmtMap(got), fmtMap(want))
	}
	// The outcomes/ listing (empty) is a page with no registry query.
	if rep.Pages < 3 || rep.Queries != rep.Pages-1 {
		t.Errorf("%d pages, %d queries, want a query for every page but outcomes/'s", rep.Pages, rep.Queries)
	}
	for k, w := range want {
		if k == "other/" {
			k = f
		}
		ok, err := store.Bucket().Exists(ctx, k)
		if err != nil || ok != strings.HasPrefix(w, "kept") {
			t.Errorf("%s (%s): exists %v, %v", k, w, ok, err)
		}
	}
}

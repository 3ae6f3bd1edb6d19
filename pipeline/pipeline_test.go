package pipeline

// Internal tests: what needs the package's insides (raw job inserts,
// migrations, configuration). The behaviour every database must share is in
// the conformance suite, package pipelinetest, run by conformance_test.go.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
)

// workTimeout bounds every Work(UntilEmpty) call: a job that never settles
// fails the test instead of hanging it.
const workTimeout = 30 * time.Second

// backends are the databases the internal tests run on; the PostgreSQL one
// skips without CLAIMCHECK_TEST_DATABASE_URL.
var backends = []struct {
	name string
	db   func(testing.TB) string // a fresh database's URL
}{
	{"SQLite", dbtest.SQLite},
	{"Postgres", dbtest.Postgres},
}

// forEachBackend runs fn as a parallel subtest per backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, newDB func(testing.TB) string)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			fn(t, be.db)
		})
	}
}

// testBundle is what most tests need: a pipeline on a fresh database, over a
// file:// store in a fresh temporary directory.
type testBundle struct {
	ctx   context.Context
	p     *Pipeline
	store *claimcheck.Store
}

type testOpts struct {
	// store options; SpoolDir is set to a fresh directory.
	store claimcheck.Options
	// cfg is the pipeline's configuration; Store is filled in, Database
	// when empty, and Retry.Base defaults to 10ms.
	cfg Config
}

func openTestStore(t *testing.T, opts claimcheck.Options) *claimcheck.Store {
	t.Helper()
	dir := t.TempDir()
	opts.SpoolDir = filepath.Join(dir, "spool")
	s, err := claimcheck.OpenStore(t.Context(), "file://"+filepath.Join(dir, "bucket"), &opts)
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("store Close: %v", err)
		}
	})
	return s
}

func setup(t *testing.T, database string, opts *testOpts) *testBundle {
	t.Helper()
	if opts == nil {
		opts = &testOpts{}
	}
	b := &testBundle{ctx: t.Context(), store: openTestStore(t, opts.store)}
	cfg := opts.cfg
	cfg.Database = database
	cfg.Store = b.store
	if cfg.Retry.Base == 0 {
		cfg.Retry.Base = 10 * time.Millisecond
	}
	p, err := Open(b.ctx, cfg)
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

func (b *testBundle) deadIDs(t *testing.T) []int64 {
	t.Helper()
	var ids []int64
	if err := b.p.List(b.ctx, ListOptions{State: StateDead}, func(j *JobInfo) error {
		ids = append(ids, j.ID)
		return nil
	}); err != nil {
		t.Fatalf("List(dead): %v", err)
	}
	return ids
}

// recorder is a handler that counts its calls.
type recorder struct {
	mu    sync.Mutex
	calls int
}

func (r *recorder) Handle(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	rc, err := job.Payload.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return nil, err
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// Jobs whose ticket is broken can only come from outside Enqueue (a bug, an
// old producer, an attacker): they are inserted with River directly, and
// dead-lettered on the first attempt without any fetch or handler call.
func TestBrokenTickets(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		offloaded := &testOpts{store: claimcheck.Options{AlwaysOffload: true}}

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
				v99 := []byte(strings.Replace(string(enc), `"v":1,`, `"v":99,`, 1))
				if string(v99) == string(enc) {
					t.Fatalf("ticket %s has no \"v\":1", enc)
				}
				return v99
			}},
			{"TicketFieldWrongType", "acme", func(t *testing.T, b *testBundle) json.RawMessage {
				// Fails River's decode of the job's arguments (the worker's
				// ticket is decoded with them), not only ParseTicket.
				enc := marshal(t, validTicket(t, b, "acme"))
				s := regexp.MustCompile(`"size":([0-9]+)`).ReplaceAllString(string(enc), `"size":"$1"`)
				if s == string(enc) {
					t.Fatalf("ticket %s has no size", enc)
				}
				return json.RawMessage(s)
			}},
			{"TenantMismatch", "other", func(t *testing.T, b *testBundle) json.RawMessage {
				return marshal(t, validTicket(t, b, "acme"))
			}},
			{"ForeignKey", "evil", func(t *testing.T, b *testBundle) json.RawMessage {
				// A ticket claiming tenant evil but pointing at acme's object.
				tk := validTicket(t, b, "acme")
				return json.RawMessage(strings.Replace(string(marshal(t, tk)), `"tenant":"acme"`, `"tenant":"evil"`, 1))
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, newDB(t), offloaded)
				id := insertRaw(t, b, tc.tenant, tc.ticket(t, b))
				h := &recorder{}
				b.work(t, map[string]claimcheck.Handler{"docs": h})
				j := b.get(t, id)
				if j.State != "cancelled" || j.Attempts != 1 || !j.Dead || j.Reason != claimcheck.ReasonTicketInvalid {
					t.Fatalf("job %d: state=%s attempts=%d dead=%v reason=%q (error %q); want cancelled on attempt 1, reason %s",
						j.ID, j.State, j.Attempts, j.Dead, j.Reason, j.Error, claimcheck.ReasonTicketInvalid)
				}
				if n := h.count(); n != 0 {
					t.Fatalf("handler called %d times, want 0", n)
				}
				if ids := b.deadIDs(t); !slices.Equal(ids, []int64{id}) {
					t.Fatalf("dead letters %v, want [%d]", ids, id)
				}
			})
		}
	})
}

// Migrations: automatic on Open, explicit with Migrate, checked (never
// applied) with SkipMigrations.
func TestMigrate(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		ctx := t.Context()

		t.Run("ExplicitThenSkip", func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			store := openTestStore(t, claimcheck.Options{})

			// Nothing migrated: SkipMigrations refuses, saying what to run.
			_, err := Open(ctx, Config{Database: db, Store: store, SkipMigrations: true})
			if !errors.Is(err, ErrNotMigrated) || !errors.Is(err, claimcheck.ErrConfig) {
				t.Fatalf("Open(SkipMigrations) on an empty database: %v, want ErrNotMigrated and ErrConfig", err)
			}
			if !strings.Contains(err.Error(), "claimcheck migrate") || !strings.Contains(err.Error(), "claimcheck_claim") {
				t.Fatalf("error %q does not name the command and the missing table", err)
			}

			res, err := Migrate(ctx, db)
			if err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			var river, registry, storage []string
			for _, a := range res.Applied {
				switch a.Component {
				case ComponentRiver:
					river = append(river, fmt.Sprint(a.Version))
				case ComponentRegistry:
					registry = append(registry, a.Name)
				case ComponentStorage:
					storage = append(storage, a.Name)
				default:
					t.Fatalf("applied migration of component %q", a.Component)
				}
			}
			if len(river) < 6 || river[0] != "1" {
				t.Fatalf("River migrations applied: %v, want all from 1", river)
			}
			want := jobdb.RegistryStepNames()
			if !slices.Equal(registry, want) {
				t.Fatalf("registry migrations applied: %v, want %v", registry, want)
			}
			if strings.Contains(res.Database, "password") {
				t.Fatalf("result names database %q", res.Database)
			}
			// On PostgreSQL (15 here, built with lz4), river_job.args is
			// set to lz4; SQLite has no such setting. A server built
			// without lz4 says so in a note instead.
			wantStorage := 0
			if res.Dialect == "postgres" {
				wantStorage = 1
				if len(res.Notes) == 1 && strings.Contains(res.Notes[0], "SQLSTATE 0A000") {
					t.Logf("this PostgreSQL has no lz4: %s", res.Notes[0])
					wantStorage, res.Notes = 0, nil
				} else if got := argsCompression(t, openSQL(t, db)); got != "l" {
					t.Fatalf("river_job.args compression %q after Migrate, want l (lz4)", got)
				}
			}
			if len(storage) != wantStorage || len(res.Notes) != 0 {
				t.Fatalf("storage steps applied: %v, notes %q; want %d step(s), no note", storage, res.Notes, wantStorage)
			}

			// Again: nothing to do.
			res, err = Migrate(ctx, db)
			if err != nil || len(res.Applied) != 0 {
				t.Fatalf("second Migrate: %+v, %v; want nothing applied", res, err)
			}

			// Now SkipMigrations opens, and the pipeline works.
			b := setup(t, db, &testOpts{store: claimcheck.Options{AlwaysOffload: true}, cfg: Config{SkipMigrations: true}})
			r, err := b.p.Enqueue(ctx, "docs", "acme", strings.NewReader("after migrate"), nil)
			if err != nil {
				t.Fatal(err)
			}
			h := &recorder{}
			b.work(t, map[string]claimcheck.Handler{"docs": h})
			if j := b.get(t, r.JobID); j.State != "completed" || h.count() != 1 {
				t.Fatalf("job %s after %d handler calls, want completed after 1", j.State, h.count())
			}

			// A registry step missing is found, and Migrate applies just it.
			if _, err := b.p.DB().ExecContext(ctx, `DROP INDEX claimcheck_claim_object_key`); err != nil {
				t.Fatal(err)
			}
			_, err = Open(ctx, Config{Database: db, Store: store, SkipMigrations: true})
			if !errors.Is(err, ErrNotMigrated) || !strings.Contains(err.Error(), "claimcheck_claim_object_key") {
				t.Fatalf("Open(SkipMigrations) without the registry index: %v, want ErrNotMigrated naming it", err)
			}
			res, err = Migrate(ctx, db)
			if err != nil || len(res.Applied) != 1 || res.Applied[0].Name != jobdb.RegistryStepNames()[1] {
				t.Fatalf("Migrate after dropping the index: %+v, %v; want the index step only", res, err)
			}
		})

		t.Run("AutomaticOnOpen", func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			setup(t, db, nil)
			res, err := Migrate(ctx, db)
			if err != nil || len(res.Applied) != 0 {
				t.Fatalf("Migrate after Open: %+v, %v; want nothing left to apply", res, err)
			}
		})
	})
}

// Processes starting together on a fresh database all migrate it (taking
// turns: an advisory lock on PostgreSQL, the write lock on SQLite) and open.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		db := newDB(t)
		store := openTestStore(t, claimcheck.Options{})
		const n = 4
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				p, err := Open(t.Context(), Config{Database: db, Store: store})
				if err == nil {
					err = p.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
			}
		}
	})
}

// Open and Work reject bad configurations.
func TestConfig(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	tryOpen := func(t *testing.T, cfg Config) error {
		t.Helper()
		if cfg.Database == "" {
			cfg.Database = dbtest.SQLite(t)
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
		s := openTestStore(t, claimcheck.Options{InlineThreshold: 1 << 20})
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
		s := openTestStore(t, claimcheck.Options{AlwaysOffload: true})
		if err := tryOpen(t, Config{Store: s, MaxMessageSize: claimcheck.MaxTicketBytes}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Fatalf("Open with MaxMessageSize = ticket budget (no room for the job's arguments): %v, want ErrConfig", err)
		}
	})

	t.Run("DefaultStoreFits", func(t *testing.T) {
		t.Parallel()
		if err := tryOpen(t, Config{Store: openTestStore(t, claimcheck.Options{})}); err != nil {
			t.Fatalf("Open with the default inline threshold and message size: %v", err)
		}
	})

	t.Run("BadDatabaseURL", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t, claimcheck.Options{})
		for _, db := range []string{"mysql://localhost/test", "sqlite://", "postgres://u:secret@[::1/x", "postgres://host/db?sslmode=bogus"} {
			err := tryOpen(t, Config{Store: s, Database: db})
			if !errors.Is(err, claimcheck.ErrConfig) {
				t.Errorf("Open(Database %q): %v, want ErrConfig", db, err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("Open(Database %q): error %q reveals the password", db, err)
			}
		}
	})

	t.Run("PostgresUnreachable", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t, claimcheck.Options{})
		start := time.Now()
		err := tryOpen(t, Config{Store: s, Database: "postgres://claimcheck:hunter2@127.0.0.1:1/nowhere?connect_timeout=5&sslmode=disable"})
		if err == nil || errors.Is(err, claimcheck.ErrConfig) {
			t.Fatalf("Open on a closed port: %v, want a connection error", err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("error %q reveals the password", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Open took %v to fail", d)
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
		b := setup(t, dbtest.SQLite(t), nil)
		if _, err := b.p.Enqueue(b.ctx, "Bad", "acme", strings.NewReader("x"), nil); !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("Enqueue(kind Bad): %v, want ErrTicketInvalid", err)
		}
		if _, err := b.p.Enqueue(b.ctx, "docs", "Acme", strings.NewReader("x"), nil); !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("Enqueue(tenant Acme): %v, want ErrTicketInvalid", err)
		}
		if _, err := b.p.Enqueue(b.ctx, "docs", "acme", strings.NewReader("x"), &EnqueueOptions{MaxAttempts: -1}); !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("Enqueue(MaxAttempts -1): %v, want ErrTicketInvalid", err)
		}
		n := 0
		if err := b.p.List(b.ctx, ListOptions{}, func(*JobInfo) error { n++; return nil }); err != nil || n != 0 {
			t.Errorf("rejected enqueues left %d jobs (%v)", n, err)
		}
		if err := b.p.Work(b.ctx, WorkOptions{UntilEmpty: true}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Work without handlers: %v, want ErrConfig", err)
		}
		if err := b.p.Work(b.ctx, WorkOptions{UntilEmpty: true, Handlers: map[string]claimcheck.Handler{"x": &recorder{}}}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Work with kind x: %v, want ErrConfig", err)
		}
	})
}

func TestCompactJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"b": 1, "a": [1, 2]}`: `{"b":1,"a":[1,2]}`,
		`{"v":1}`:               `{"v":1}`,
		`"{\"v\":1,\"ten"`:      `"{\"v\":1,\"ten"`,
		`not json`:              `not json`,
	} {
		if got := string(compactJSON([]byte(in))); got != want {
			t.Errorf("compactJSON(%s) = %s, want %s", in, got, want)
		}
	}
}

// argsCompression is river_job.args' TOAST compression in the PostgreSQL
// database (and schema) sdb: "l" lz4, "p" pglz, "" the server's default.
func argsCompression(t *testing.T, sdb *sql.DB) string {
	t.Helper()
	var method string
	if err := sdb.QueryRowContext(t.Context(), `SELECT attcompression::text FROM pg_attribute
		WHERE attrelid = 'river_job'::regclass AND attname = 'args'`).Scan(&method); err != nil {
		t.Fatalf("read river_job.args' compression: %v", err)
	}
	return method
}

// openSQL opens the database at u for a test's own statements.
func openSQL(t *testing.T, u string) *sql.DB {
	t.Helper()
	target, err := dbopen.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	sdb, err := dbopen.Open(t.Context(), target, &dbopen.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	return sdb
}

// A role that may use the job database but does not own river_job cannot
// set its compression: Migrate says so in a note and succeeds, the column
// left as it was; the owner's next Migrate sets it.
func TestMigrateStorageNotOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dbtest.Postgres(t)
	if _, err := Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	owner := openSQL(t, db)
	if _, err := owner.ExecContext(ctx, `ALTER TABLE river_job ALTER COLUMN args SET COMPRESSION default`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	role := "cc_user_" + strings.TrimPrefix(schema, dbtest.SchemaPrefix)
	password := "pw-" + role // a password, whatever the server's pg_hba.conf asks for
	if _, err := owner.ExecContext(ctx, `CREATE ROLE `+role+` LOGIN PASSWORD '`+password+`'`); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" && os.Getenv("CI") == "" {
			t.Skipf("the role of %s may not create roles: %v", dbtest.EnvPostgresURL, err)
		}
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
	} {
		if _, err := owner.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		for _, stmt := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := owner.ExecContext(ctx, stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	u.User = url.UserPassword(role, password)
	res, err := Migrate(ctx, u.String())
	if err != nil {
		t.Fatalf("Migrate as %s, who does not own river_job: %v", role, err)
	}
	if len(res.Applied) != 0 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "42501") || !strings.Contains(res.Notes[0], "river_job.args") {
		t.Fatalf("Migrate as a role that does not own river_job: applied %+v, notes %q; want nothing applied and one note naming river_job.args and SQLSTATE 42501", res.Applied, res.Notes)
	}
	if got := argsCompression(t, owner); got != "" {
		t.Fatalf("river_job.args compression %q after the role's Migrate, want the default (\"\") left as it was", got)
	}
	res, err = Migrate(ctx, db)
	if err == nil && len(res.Notes) == 1 && strings.Contains(res.Notes[0], "SQLSTATE 0A000") {
		t.Skipf("this PostgreSQL has no lz4: %s", res.Notes[0])
	}
	if err != nil || len(res.Applied) != 1 || res.Applied[0].Component != ComponentStorage || len(res.Notes) != 0 {
		t.Fatalf("the owner's Migrate: %+v, %v; want the storage step applied", res, err)
	}
	if got := argsCompression(t, owner); got != "l" {
		t.Fatalf("river_job.args compression %q after the owner's Migrate, want l (lz4)", got)
	}
}

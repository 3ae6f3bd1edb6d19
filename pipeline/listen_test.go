package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// TestWorkersListenOnPostgres: on PostgreSQL, Work's River client holds a
// LISTEN connection of its own (River's pgx listener, on a pool of its
// own), so an enqueue's NOTIFY wakes it rather than its next poll; SQLite
// needs no pool for it (River's SQLite driver emulates LISTEN in the
// database file); a pipeline that writes nothing has no listener pool.
func TestWorkersListenOnPostgres(t *testing.T) {
	pg := dbtest.Postgres(t)
	b := setup(t, pg, nil)
	if !b.p.driver.SupportsListener() || b.p.listen == nil {
		t.Fatal("the PostgreSQL driver has no listener")
	}
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.p.Work(ctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"listen-check": claimcheck.HandlerFunc(
			func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) { return nil, nil })}})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Work: %v", err)
		}
	}()
	// The listener is River's notifier's session: its last statement a
	// LISTEN, on this database.
	for deadline := time.Now().Add(time.Minute); ; {
		var n int
		if err := b.p.DB().QueryRowContext(b.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query ILIKE 'listen %'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no LISTEN session on the job database a minute after Work started")
		}
		time.Sleep(50 * time.Millisecond)
	}

	lite := setup(t, dbtest.SQLite(t), nil)
	if lite.p.listen != nil {
		t.Error("a SQLite pipeline opened a PostgreSQL listener pool")
	}
	ro := setup(t, pg, &testOpts{cfg: Config{NoWrites: true}})
	if ro.p.listen != nil {
		t.Error("a NoWrites pipeline opened a listener pool")
	}
}

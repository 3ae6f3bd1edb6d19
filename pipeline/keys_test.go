package pipeline

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
)

// sealingOptions are store options sealing under a fresh local key, and
// the key's id.
func sealingOptions(t *testing.T, o claimcheck.Options) (claimcheck.Options, string) {
	t.Helper()
	kek, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	o.Keeper, o.KeeperID = localsecrets.NewKeeper(kek), claimcheck.LocalKeyID(kek[:])
	return o, o.KeeperID
}

func recorded(t *testing.T, p *Pipeline) []string {
	t.Helper()
	ids, err := RecordedKeyIDs(t.Context(), p.DB())
	if err != nil {
		t.Fatalf("RecordedKeyIDs: %v", err)
	}
	slices.Sort(ids)
	return ids
}

// TestRecordedKeyIDs: every key that seals a payload or result is recorded
// in claimcheck_key (inline and offloaded check-ins, a ticket sealed
// outside the pipeline and enqueued with EnqueueTx, a result), a plain
// store records nothing, a rolled-back EnqueueTx records nothing, and a
// database from before the table (jobs with sealed inline payloads, no
// claimcheck_key) reads, and is migrated to, "(unrecorded)".
func TestRecordedKeyIDs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		ctx := t.Context()
		db := newDB(t)

		plain := setup(t, db, nil)
		if _, err := plain.p.Enqueue(ctx, "docs", "acme", strings.NewReader("plain"), nil); err != nil {
			t.Fatal(err)
		}
		if ids := recorded(t, plain.p); len(ids) != 0 {
			t.Fatalf("after a plain enqueue: %q recorded, want none", ids)
		}

		// Inline, sealed under key A; its result (inline) too.
		optsA, idA := sealingOptions(t, claimcheck.Options{Name: "a"})
		a := setup(t, db, &testOpts{store: optsA})
		r, err := a.p.Enqueue(ctx, "docs", "acme", strings.NewReader("inline"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Ticket.IsInline() || r.Ticket.DEK == "" || r.Ticket.KID != idA {
			t.Fatalf("ticket: inline %v, dek %v, kid %q; want an inline sealed ticket with kid %s", r.Ticket.IsInline(), r.Ticket.DEK != "", r.Ticket.KID, idA)
		}
		if ids := recorded(t, a.p); !slices.Equal(ids, []string{idA}) {
			t.Fatalf("after an inline sealed enqueue: %q, want [%s]", ids, idA)
		}

		// Offloaded, sealed under key B.
		optsB, idB := sealingOptions(t, claimcheck.Options{Name: "b", AlwaysOffload: true})
		b := setup(t, db, &testOpts{store: optsB})
		if _, err := b.p.Enqueue(ctx, "docs", "acme", strings.NewReader("offloaded"), nil); err != nil {
			t.Fatal(err)
		}
		want := []string{idA, idB}
		slices.Sort(want)
		if ids := recorded(t, b.p); !slices.Equal(ids, want) {
			t.Fatalf("after an offloaded sealed enqueue: %q, want %q", ids, want)
		}

		// Sealed outside the pipeline under key C, then EnqueueTx: rolled
		// back, nothing; committed, C.
		optsC, idC := sealingOptions(t, claimcheck.Options{Name: "c"})
		c := setup(t, db, &testOpts{store: optsC})
		tk, err := c.store.CheckIn(ctx, "acme", strings.NewReader("sealed by the store alone"), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, commit := range []bool{false, true} {
			tx, err := c.p.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.p.EnqueueTx(ctx, tx, "docs", tk, nil); err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(recorded(t, c.p), idC); got != commit {
				t.Fatalf("EnqueueTx committed %v: key C recorded %v", commit, got)
			}
		}

		// A database from before claimcheck_key: read as "(unrecorded)"
		// (the inline sealed job of key A), and migrated so.
		if _, err := a.p.DB().ExecContext(ctx, `DROP TABLE claimcheck_key`); err != nil {
			t.Fatal(err)
		}
		if ids := recorded(t, a.p); !slices.Equal(ids, []string{"(unrecorded)"}) {
			t.Fatalf("without claimcheck_key: %q, want [(unrecorded)]", ids)
		}
		res, err := Migrate(ctx, db)
		if err != nil || len(res.Applied) != 1 || res.Applied[0].Name != "create table claimcheck_key" {
			t.Fatalf("Migrate without claimcheck_key: %+v, %v; want that step alone", res, err)
		}
		if ids := recorded(t, a.p); !slices.Equal(ids, []string{"(unrecorded)"}) {
			t.Fatalf("after the backfill: %q, want [(unrecorded)]", ids)
		}

		// A sealed inline result is found by the backfill's condition.
		h := claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return &claimcheck.Result{Body: strings.NewReader("small result")}, nil
		})
		a.work(t, map[string]claimcheck.Handler{"docs": h})
		cond := `json_extract(metadata, '$.output.result.dek') IS NOT NULL`
		if a.p.dialect == dbopen.Postgres {
			cond = `metadata->'output'->'result'->>'dek' IS NOT NULL`
		}
		var results int
		if err := a.p.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM river_job WHERE `+cond).Scan(&results); err != nil || results == 0 {
			t.Fatalf("jobs with a sealed inline result: %d, %v; want some", results, err)
		}
	})
}

// TestRecordedKeyIDsEmptyDatabase: a database without River's tables
// records nothing, and is not an error.
func TestRecordedKeyIDsEmptyDatabase(t *testing.T) {
	db := openSQL(t, "sqlite://"+filepath.ToSlash(filepath.Join(t.TempDir(), "empty.db")))
	if ids, err := RecordedKeyIDs(t.Context(), db); err != nil || len(ids) != 0 {
		t.Fatalf("RecordedKeyIDs(empty database) = %q, %v; want none", ids, err)
	}
}

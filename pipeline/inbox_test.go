package pipeline

import (
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// TestPruneInbox: records settled before the cutoff go, with their release
// counts; later ones stay, and a pruned message is no longer seen.
func TestPruneInbox(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), nil)
		in := b.p.Inbox()
		for _, o := range []broker.Outcome{
			{ID: "old-acked", Queue: "q", Delivery: "d1", Kind: "pages", Tenant: "acme", Attempt: 1, Action: broker.Acked},
			{ID: "old-released", Queue: "q", Delivery: "d2", Kind: "pages", Tenant: "acme", Attempt: 1, Action: broker.Released},
			{ID: "new-dead", Queue: "q", Delivery: "d3", Kind: "pages", Tenant: "acme", Attempt: 1, Action: broker.DeadLettered, Reason: "payload-missing"},
			{ID: "new-released", Queue: "q", Delivery: "d4", Kind: "pages", Tenant: "acme", Attempt: 1, Action: broker.Released},
		} {
			if err := in.Record(b.ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-30 * 24 * time.Hour).UTC()
		if _, err := b.p.DB().ExecContext(b.ctx, `UPDATE claimcheck_consumed SET updated_at = $1 WHERE message_id IN ('old-acked', 'old-released')`, old); err != nil {
			t.Fatal(err)
		}
		n, err := b.p.PruneInbox(b.ctx, time.Now().Add(-22*24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("pruned %d messages, want 2 (old-acked, old-released)", n)
		}
		if got := countRows(t, b, `SELECT COUNT(*) FROM claimcheck_consumed`); got != 2 {
			t.Errorf("%d inbox records left, want 2", got)
		}
		if got := countRows(t, b, `SELECT COUNT(*) FROM claimcheck_released WHERE message_id = 'old-released'`); got != 0 {
			t.Errorf("the pruned message's release count is still there (%d rows)", got)
		}
		if got := countRows(t, b, `SELECT COUNT(*) FROM claimcheck_released WHERE message_id = 'new-released'`); got != 1 {
			t.Errorf("the kept message's release count is gone (%d rows)", got)
		}
		if s, err := in.Seen(b.ctx, "q", "old-acked", "d1"); err != nil || s.Processed {
			t.Errorf("pruned message: seen %+v, %v; want not processed", s, err)
		}
		if s, err := in.Seen(b.ctx, "q", "new-released", "d4"); err != nil || s.Released != 1 {
			t.Errorf("kept message: seen %+v, %v; want 1 release", s, err)
		}
	})
}

// The inbox's database failures are claimcheck.ErrUnavailable, so that a
// consumer waits for the database rather than spend the message's
// attempts (before, a lookup during a PostgreSQL outage was a transient
// failure, and 92 of 100 messages of TestChaosPostgresKilledBroker were
// dead-lettered).
func TestInboxErrorsAreUnavailable(t *testing.T) {
	b := setup(t, dbtest.SQLite(t), nil)
	in := b.p.Inbox()
	if err := b.p.DB().Close(); err != nil {
		t.Fatal(err)
	}
	_, err := in.Seen(b.ctx, "q", "m", "d")
	if claimcheck.Classify(err) != claimcheck.FailureUnavailable {
		t.Errorf("Seen on a closed database: %v, class %s; want unavailable", err, claimcheck.Classify(err))
	}
	err = in.Record(b.ctx, broker.Outcome{ID: "m", Queue: "q", Action: broker.Acked})
	if claimcheck.Classify(err) != claimcheck.FailureUnavailable {
		t.Errorf("Record on a closed database: %v, class %s; want unavailable", err, claimcheck.Classify(err))
	}
}

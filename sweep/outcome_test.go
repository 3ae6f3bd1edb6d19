package sweep_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/sweep"
)

// Outcome records (docs/invariants.md, invariant 12) go with the one
// sweep: a record older than the grace period is removed once its job is
// settled, kept whatever its age while its job is pending, kept within
// the grace period; a broker message's record goes by age alone.
func TestSweepOutcomeRecords(t *testing.T) {
	databases(t, func(t *testing.T, b *bundle) {
		pending, _ := b.enqueue(t, "outcome-pending", "pending")
		done, _ := b.enqueue(t, "outcome-done", "done")
		b.work(t, "outcome-done", func(_ context.Context, job *claimcheck.Job) (*claimcheck.Result, error) { return nil, nil })
		keys := map[string]string{
			"settled": claimcheck.PrefixOutcomes + strconv.FormatInt(done, 10) + "-abc.json",
			"pending": claimcheck.PrefixOutcomes + strconv.FormatInt(pending, 10) + "-abc.json",
			"young":   claimcheck.PrefixOutcomes + "999999-abc.json",
			"broker":  claimcheck.PrefixOutcomes + "msg.rabbit.x-abc.json",
		}
		for name, key := range keys {
			if err := b.store.Bucket().WriteAll(b.ctx, key, []byte(`{"version":1}`), nil); err != nil {
				t.Fatal(err)
			}
			if name != "young" {
				b.backdate(t, key, 48*time.Hour)
			}
		}
		got := decisions(b.sweep(t, sweep.Options{}))
		want := map[string]string{"settled": "removed settled-outcome", "pending": "kept referenced", "young": "kept too-young", "broker": "removed settled-outcome"}
		for name, key := range keys {
			if got[key] != want[name] {
				t.Errorf("%s record: %q, want %q", name, got[key], want[name])
			}
			if gone := !b.exists(t, key); gone != (want[name] == "removed settled-outcome") {
				t.Errorf("%s record: removed %v after the sweep", name, gone)
			}
		}
	})
}

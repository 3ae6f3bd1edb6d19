package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
)

// TestCountMatchesList: on SQLite and PostgreSQL, Count says as many jobs
// as List lists for each state, kind, tenant and Since (210 dead letters
// of two kinds and tenants, 40 waiting), and Activity's last step holds
// what was enqueued and finished, its depth the jobs still to work.
func TestCountMatchesList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), nil)
		start := time.Now()
		for i := range 210 {
			kind, tenant := "reject", "acme"
			if i%3 == 0 {
				kind, tenant = "refuse", "globex"
			}
			if _, err := b.p.Enqueue(b.ctx, kind, tenant, strings.NewReader(fmt.Sprint("dead ", i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		fail := claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return nil, claimcheck.Permanent(errors.New("refused by the test"))
		})
		b.work(t, map[string]claimcheck.Handler{"reject": fail, "refuse": fail})
		for i := range 40 {
			if _, err := b.p.Enqueue(b.ctx, "invoice", "acme", strings.NewReader(fmt.Sprint("waiting ", i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range []ListOptions{
			{}, {State: StateDead}, {State: "available"}, {State: StateDead, Kind: "refuse"}, {State: StateDead, Tenants: []string{"acme"}},
			{Kind: "invoice"}, {State: StateDead, Since: time.Now().Add(time.Hour)}, {State: StateDead, Since: start.Add(-time.Minute)}, {State: "completed"},
		} {
			listed := int64(0)
			if err := b.p.List(b.ctx, o, func(*JobInfo) error { listed++; return nil }); err != nil {
				t.Fatal(err)
			}
			n, err := b.p.Count(b.ctx, o)
			if err != nil {
				t.Fatalf("Count(%+v): %v", o, err)
			}
			if n != listed {
				t.Errorf("Count(%+v) = %d, List lists %d", o, n, listed)
			}
		}
		if n, _ := b.p.Count(b.ctx, ListOptions{State: StateDead}); n != 210 {
			t.Errorf("Count(dead) = %d, want 210", n)
		}
		if _, err := b.p.Count(b.ctx, ListOptions{State: "nope"}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Count(state nope): %v, want ErrConfig", err)
		}
		now := time.Now()
		points, err := b.p.Activity(b.ctx, now.Add(-time.Hour), now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var enq, dead int64
		for _, pt := range points {
			enq += pt.Enqueued
			dead += pt.Dead
		}
		if len(points) != 61 || enq != 250 || dead != 210 || points[len(points)-1].Depth != 40 {
			t.Errorf("Activity: %d points, %d enqueued, %d dead, depth %d at the end; want 61, 250, 210, 40", len(points), enq, dead, points[len(points)-1].Depth)
		}
		if _, err := b.p.Activity(b.ctx, now, now, time.Minute); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Activity over no time: %v, want ErrConfig", err)
		}
	})
}

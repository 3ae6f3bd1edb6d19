package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
)

// A tenant-restricted worker (Options.Tenants) leaves the jobs of tenants
// it does not serve in their queue, nothing fetched and no attempt spent,
// and its UntilEmpty does not wait for them; a worker serving the tenant
// then completes them. A ticket of an unserved tenant inside a served
// tenant's job is still refused before any fetch (ticket-invalid: the
// ticket's tenant is not the job's).
func TestWorkLeavesUnservedTenants(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		database := newDB(t)
		dir := t.TempDir()
		storeURL := "file://" + filepath.Join(dir, "bucket")
		open := func(tenants ...string) *Pipeline {
			t.Helper()
			st, err := claimcheck.OpenStore(t.Context(), storeURL, &claimcheck.Options{AlwaysOffload: true, Tenants: tenants, SpoolDir: filepath.Join(dir, "spool")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			p, err := Open(t.Context(), Config{Database: database, Store: st, Retry: claimcheck.RetryPolicy{Base: 10 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			return p
		}
		producer := open()
		ctx := t.Context()
		acme, err := producer.Enqueue(ctx, "docs", "acme", strings.NewReader("acme's payload"), nil)
		if err != nil {
			t.Fatal(err)
		}
		globex, err := producer.Enqueue(ctx, "docs", "globex", strings.NewReader("globex's payload"), nil)
		if err != nil {
			t.Fatal(err)
		}
		// A forged job: tenant acme in the job, a ticket of globex's.
		ticket, err := globex.Ticket.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		forged, err := producer.client.Insert(ctx, jobArgs{JobKind: "docs", Tenant: "acme", Ticket: ticket}, &river.InsertOpts{Queue: "docs"})
		if err != nil {
			t.Fatal(err)
		}

		work := func(p *Pipeline) (*recorder, map[JobState][]int64) {
			t.Helper()
			h := &recorder{}
			states := map[JobState][]int64{}
			var mu sync.Mutex
			wctx, cancel := context.WithTimeout(ctx, workTimeout)
			defer cancel()
			err := p.Work(wctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"docs": h}, UntilEmpty: true, OnDone: func(o Outcome) {
				mu.Lock()
				defer mu.Unlock()
				states[o.State] = append(states[o.State], o.JobID)
			}})
			if err != nil {
				t.Fatalf("Work: %v", err)
			}
			return h, states
		}
		h, states := work(open("acme"))
		if n := h.count(); n != 1 {
			t.Fatalf("acme worker: handler called %d times, want 1 (acme's job only)", n)
		}
		if len(states[JobLeft]) == 0 || states[JobLeft][0] != globex.JobID {
			t.Fatalf("acme worker: outcomes %v, want job %d left", states, globex.JobID)
		}
		if j, _ := producer.Get(ctx, acme.JobID); j.State != "completed" {
			t.Fatalf("acme's job %d: %s, want completed", acme.JobID, j.State)
		}
		j, err := producer.Get(ctx, forged.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !j.Dead || j.Reason != claimcheck.ReasonTicketInvalid || j.Attempts != 1 {
			t.Fatalf("forged job %d: state=%s dead=%v reason=%q attempts=%d, want dead ticket-invalid on attempt 1", j.ID, j.State, j.Dead, j.Reason, j.Attempts)
		}
		j, err = producer.Get(ctx, globex.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Dead || j.State == "completed" || j.Attempts != 0 {
			t.Fatalf("globex's job %d after the acme worker: state=%s dead=%v attempts=%d reason=%q; want pending, no attempt spent", j.ID, j.State, j.Dead, j.Attempts, j.Reason)
		}

		h, states = work(open("globex"))
		if n := h.count(); n != 1 || len(states[JobLeft]) != 0 {
			t.Fatalf("globex worker: handler called %d times, outcomes %v; want 1 call, none left", n, states)
		}
		if j, _ := producer.Get(ctx, globex.JobID); j.State != "completed" || j.Attempts != 1 {
			t.Fatalf("globex's job %d: %s after %d attempts, want completed on attempt 1", globex.JobID, j.State, j.Attempts)
		}
	})
}

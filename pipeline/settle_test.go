package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/broker/natsjs"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// openJetStream opens a transport on a stream of the test's own on the
// server in CLAIMCHECK_TEST_NATS_URL (skipped without it), deleted at
// cleanup.
func openJetStream(t *testing.T, opts natsjs.Options) *natsjs.Transport {
	t.Helper()
	u := brokertest.ServerURL(t, "CLAIMCHECK_TEST_NATS_URL", "nats://127.0.0.1:4222, a server with JetStream")
	name := fmt.Sprintf("cctest_settle_%d_%d", os.Getpid(), time.Now().UnixNano())
	opts.Stream, opts.Subject, opts.Consumer = name, "cctest."+name, "worker"
	tr, err := natsjs.Open(t.Context(), u, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tr.DeleteTopology(ctx); err != nil {
			t.Errorf("delete topology: %v", err)
		}
		tr.Close()
	})
	return tr
}

// consumeUntil runs broker.Consume on tr until done reports true for the
// outcomes so far, or within has passed; it fails the test if done is
// false then.
func (b *testBundle) consumeUntil(t *testing.T, tr broker.Transport, opts broker.ConsumeOptions, within time.Duration, done func([]broker.Outcome) bool) []broker.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within)
	defer cancel()
	var mu sync.Mutex
	var got []broker.Outcome
	finished := make(chan struct{})
	opts.OnDone = func(_ *broker.Delivery, o broker.Outcome) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, o)
		if done(got) {
			select {
			case <-finished:
			default:
				close(finished)
			}
		}
	}
	if opts.OnError == nil {
		opts.OnError = func(err error) { t.Logf("consume: %v", err) }
	}
	errc := make(chan error, 1)
	go func() { errc <- broker.Consume(ctx, tr, b.store, opts) }()
	select {
	case <-finished:
	case <-ctx.Done():
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !done(got) {
		t.Fatalf("consume: outcomes %+v before the timeout", got)
	}
	return got
}

// TestReplayInsideJetStreamDuplicateWindow: an outbox entry relayed to
// JetStream is dead-lettered, then replayed (Replay) while the stream still
// remembers the first publish's Nats-Msg-Id: its duplicate window is 2
// minutes and the replay goes out 10 s after the first publish (a real
// wait: the window is the server's clock). The replay is delivered with an
// id of its own, its handler runs exactly once (nothing more arrives in 2.5
// ack waits), and the job is completed.
func TestReplayInsideJetStreamDuplicateWindow(t *testing.T) {
	tr := openJetStream(t, natsjs.Options{AckWait: 2 * time.Second})
	b := setup(t, dbtest.SQLite(t), nil)
	res, err := b.p.Enqueue(b.ctx, "pages", "acme", strings.NewReader("replay me"), &EnqueueOptions{Destinations: []string{"js"}})
	if err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	b.relay(t, "js", tr, nil)
	var mu sync.Mutex
	var runs []string
	h := claimcheck.HandlerFunc(func(_ context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, job.ID)
		if len(runs) == 1 {
			return nil, claimcheck.Permanent(errors.New("refused the first time"))
		}
		return nil, nil
	})
	opts := broker.ConsumeOptions{Handlers: map[string]claimcheck.Handler{"pages": h}, Inbox: b.p.Inbox()}
	got := b.consumeUntil(t, tr, opts, workTimeout, func(o []broker.Outcome) bool { return len(o) >= 1 })
	if got[0].Action != broker.DeadLettered {
		t.Fatalf("first outcome %s, want dead-lettered", got[0].Action)
	}
	firstDelivery, key := got[0].Delivery, got[0].ID
	if j := b.get(t, res.JobID); !j.Dead {
		t.Fatalf("job %d: state %s, want dead", j.ID, j.State)
	}
	// Count says what List lists: the broker dead letter among the dead.
	for _, o := range []ListOptions{{State: StateDead}, {State: StateDead, Kind: "pages", Tenants: []string{"acme"}}} {
		if n, err := b.p.Count(b.ctx, o); err != nil || n != 1 {
			t.Errorf("Count(%+v) = %d, %v; want the broker dead letter", o, n, err)
		}
	}
	const replayAfter = 10 * time.Second
	time.Sleep(time.Until(first.Add(replayAfter)))
	if _, err := b.p.Replay(b.ctx, res.JobID); err != nil {
		t.Fatal(err)
	}
	b.relay(t, "js", tr, nil)
	replayed := time.Since(first)
	got = b.consumeUntil(t, tr, opts, workTimeout, func(o []broker.Outcome) bool { return len(o) >= 1 })
	// Nothing else arrives within 2.5 ack waits: the replay ran once.
	quiet := b.consumeUntil(t, tr, opts, 5*time.Second, func([]broker.Outcome) bool { return true })
	mu.Lock()
	defer mu.Unlock()
	t.Logf("replay published %v after the first publish (duplicate window %v) as message %s (first %s): outcome %s, handler runs %d, later deliveries %d",
		replayed.Round(10*time.Millisecond), tr.Options().DuplicateWindow, got[0].Delivery, firstDelivery, got[0].Action, len(runs), len(quiet))
	if got[0].Delivery == firstDelivery || got[0].ID != key {
		t.Errorf("replay delivered as message %s with key %s; want an id of its own (not %s) and the key %s", got[0].Delivery, got[0].ID, firstDelivery, key)
	}
	if replayed < replayAfter || replayed >= tr.Options().DuplicateWindow {
		t.Fatalf("the replay went out %v after the first publish, outside the %v window: the test proves nothing", replayed, tr.Options().DuplicateWindow)
	}
	if got[0].Action != broker.Acked || got[0].Duplicate || len(runs) != 2 || len(quiet) != 0 {
		t.Fatalf("replay: %s (duplicate %t), handler runs %d, later deliveries %d; want acked, 2 runs, none", got[0].Action, got[0].Duplicate, len(runs), len(quiet))
	}
	if j := b.get(t, res.JobID); j.State != "completed" {
		t.Fatalf("job %d after the replay: %s, want completed", j.ID, j.State)
	}
	if n, err := b.p.Count(b.ctx, ListOptions{State: StateDead}); err != nil || n != 0 {
		t.Errorf("Count(dead) after the replay = %d, %v; want 0", n, err)
	}
}

// TestNotRelayableReason: an entry the transport refuses for good (larger
// than its maximum message size) is dead on the relay's first try with
// its own reason, not-relayable, and not transient.
func TestNotRelayableReason(t *testing.T) {
	b := setup(t, dbtest.SQLite(t), nil)
	res, err := b.p.Enqueue(b.ctx, "pages", "acme", strings.NewReader("too large for the broker"), &EnqueueOptions{Destinations: []string{"tiny"}})
	if err != nil {
		t.Fatal(err)
	}
	var sent []error
	b.relay(t, "tiny", brokertest.NewFake(64), func(_ int64, err error) { sent = append(sent, err) })
	j := b.get(t, res.JobID)
	t.Logf("entry %d: state %s, reason %s, attempts %d, error %q", j.ID, j.State, j.Reason, j.Attempts, j.Error)
	if !j.Dead || j.Reason != ReasonNotRelayable || len(sent) != 1 || !errors.Is(sent[0], ErrNotRelayable) || !errors.Is(sent[0], broker.ErrMessageTooLarge) {
		t.Fatalf("entry dead %t with reason %q after %d tries (%v); want dead, %q, on the first", j.Dead, j.Reason, len(sent), sent, ReasonNotRelayable)
	}
}

package pipelinetest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/pipeline"
)

// failFirstRelease is a broker.Releaser that fails its first call without
// doing anything, as when the job database or the store is unreachable at
// that moment, then releases through the pipeline.
type failFirstRelease struct {
	p      *pipeline.Pipeline
	mu     sync.Mutex
	failed bool
}

func (f *failFirstRelease) Release(ctx context.Context, job int64, queue string, t *claimcheck.Ticket) (bool, error) {
	f.mu.Lock()
	first := !f.failed
	f.failed = true
	f.mu.Unlock()
	if first {
		return false, fmt.Errorf("fault injected by the test: store unreachable: %w", claimcheck.ErrUnavailable)
	}
	return f.p.Release(ctx, job, queue, t)
}

// BrokerFanOut checks deletion on acknowledgement when the broker itself
// copies one relayed message to several queues (a RabbitMQ fanout
// exchange, an SNS topic feeding SQS queues). relay publishes to the
// destination and must implement broker.FanOut naming exactly the queues
// of consumers, each a transport of its own queue (at least two), all
// empty. On a SQLite pipeline over a file store it checks that:
//   - the relay registers one payload reference per queue;
//   - every queue's consumer runs its handler once (the inbox is kept per
//     queue), and the object survives until the last one acknowledges,
//     which deletes it and leaves no registry row;
//   - a release that fails in the last queue is not acknowledged: the
//     redelivery, found processed, releases the reference, and then no
//     object and no registry row are left, the handler having run once.
func BrokerFanOut(t *testing.T, relay broker.Transport, consumers []broker.Transport) {
	t.Helper()
	if len(consumers) < 2 {
		t.Fatal("BrokerFanOut needs two consumer transports at least")
	}
	ctx := t.Context()
	dir := t.TempDir()
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "bucket")), &claimcheck.Options{SpoolDir: filepath.Join(dir, "spool"), AlwaysOffload: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p, err := pipeline.Open(ctx, pipeline.Config{Database: SQLiteDatabase(t), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	count := func(query string, args ...any) int {
		t.Helper()
		var n int
		if err := p.DB().QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	exists := func(tk *claimcheck.Ticket) bool {
		t.Helper()
		info, err := store.Stat(ctx, tk)
		if err != nil {
			t.Fatal(err)
		}
		return info.Exists
	}
	var mu sync.Mutex
	runs := map[string]int{} // queue + job id → handler runs
	// consume works q until an acknowledgement (or until within is over),
	// and returns the outcomes.
	consume := func(q broker.Transport, release broker.Releaser, within time.Duration) []broker.Outcome {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		var got []broker.Outcome
		queue := broker.QueueName(q)
		err := broker.Consume(cctx, q, store, broker.ConsumeOptions{
			Inbox: p.Inbox(), DeleteOnAck: release, Policy: claimcheck.RetryPolicy{Base: 200 * time.Millisecond},
			Handlers: map[string]claimcheck.Handler{"fan": claimcheck.HandlerFunc(func(_ context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
				mu.Lock()
				runs[queue+" job "+job.ID]++
				mu.Unlock()
				return nil, nil
			})},
			OnDone: func(_ *broker.Delivery, o broker.Outcome) {
				got = append(got, o)
				if o.Action == broker.Acked {
					cancel()
				}
			},
			OnError: func(err error) { t.Logf("consume %s: %v", queue, err) },
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	send := func(body string) (*pipeline.EnqueueResult, string) {
		t.Helper()
		res, err := p.Enqueue(ctx, "fan", "acme", strings.NewReader(body), &pipeline.EnqueueOptions{Destinations: []string{"fan"}})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, WorkTimeout)
		defer cancel()
		if err := p.Relay(rctx, pipeline.RelayOptions{Destination: "fan", Transport: relay, UntilEmpty: true}); err != nil {
			t.Fatal(err)
		}
		return res, fmt.Sprint(res.JobID)
	}
	refs := func(res *pipeline.EnqueueResult) int {
		return count(`SELECT COUNT(*) FROM claimcheck_claim WHERE object_key = $1`, res.Ticket.Key)
	}

	// Every queue acknowledges in turn; the last one deletes.
	res, job := send("copied by the broker")
	if n := refs(res); n != len(consumers) {
		t.Fatalf("%d registry rows for the relayed payload, want one per queue (%d)", n, len(consumers))
	}
	for i, q := range consumers {
		got := consume(q, p, WorkTimeout)
		last := got[len(got)-1]
		if last.Action != broker.Acked || last.Duplicate || last.Deleted != (i == len(consumers)-1) {
			t.Fatalf("queue %s: outcome %s (duplicate %t, deleted %t)", broker.QueueName(q), last.Action, last.Duplicate, last.Deleted)
		}
		if i < len(consumers)-1 && (!exists(res.Ticket) || refs(res) != len(consumers)-1-i) {
			t.Fatalf("after %d of %d queues acknowledged: object exists %t, %d registry rows", i+1, len(consumers), exists(res.Ticket), refs(res))
		}
	}
	if exists(res.Ticket) || refs(res) != 0 {
		t.Fatalf("after every queue acknowledged: object exists %t, %d registry rows; want neither", exists(res.Ticket), refs(res))
	}
	for _, q := range consumers {
		if n := runs[broker.QueueName(q)+" job "+job]; n != 1 {
			t.Errorf("queue %s ran the handler %d times, want once", broker.QueueName(q), n)
		}
	}
	t.Logf("fan-out to %d queues: each handler ran once, the object survived until the last acknowledgement, then no object and no registry row", len(consumers))

	// The last queue's first release fails: redelivered, released then.
	res, job = send("copied by the broker, released late")
	for _, q := range consumers[:len(consumers)-1] {
		consume(q, p, WorkTimeout)
	}
	lastQ := consumers[len(consumers)-1]
	got := consume(lastQ, &failFirstRelease{p: p}, WorkTimeout)
	var actions []string
	for _, o := range got {
		actions = append(actions, fmt.Sprintf("%s(duplicate=%t deleted=%t)", o.Action, o.Duplicate, o.Deleted))
	}
	t.Logf("failed first release, then redelivery: %s; object exists %t, registry rows %d, handler runs %d",
		strings.Join(actions, ", "), exists(res.Ticket), refs(res), runs[broker.QueueName(lastQ)+" job "+job])
	if len(got) != 2 || got[0].Action != broker.Retried || got[1].Action != broker.Acked || !got[1].Duplicate || !got[1].Deleted {
		t.Fatalf("outcomes %s; want retried (release failed), then acked as a duplicate with the object deleted", strings.Join(actions, ", "))
	}
	if exists(res.Ticket) || refs(res) != 0 || runs[broker.QueueName(lastQ)+" job "+job] != 1 {
		t.Fatalf("object exists %t, %d registry rows, handler ran %d times; want no object, no row, one run",
			exists(res.Ticket), refs(res), runs[broker.QueueName(lastQ)+" job "+job])
	}
}

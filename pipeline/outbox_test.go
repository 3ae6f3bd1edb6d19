package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// outageTransport wraps a Fake and refuses its first publishes, as a
// broker does during an outage (the real outage is tested against
// RabbitMQ and NATS in their packages and in the command's tests).
type outageTransport struct {
	*brokertest.Fake
	refuse    int64 // publishes refused before the broker is back
	calls     atomic.Int64
	refused   atomic.Int64
	published atomic.Int64
	// onPublish, if set, sees every publish the broker accepts, before
	// it is delivered.
	onPublish func([]broker.Message)
}

func (o *outageTransport) Publish(ctx context.Context, msgs []broker.Message) error {
	if o.calls.Add(1) <= o.refuse {
		o.refused.Add(1)
		return fmt.Errorf("outage stand-in: connection refused: %w", claimcheck.ErrUnavailable)
	}
	if o.onPublish != nil {
		o.onPublish(msgs)
	}
	o.published.Add(int64(len(msgs)))
	return o.Fake.Publish(ctx, msgs)
}

func (b *testBundle) relay(t *testing.T, dest string, tr broker.Transport, onSent func(int64, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, workTimeout)
	defer cancel()
	if err := b.p.Relay(ctx, RelayOptions{Destination: dest, Transport: tr, UntilEmpty: true, Batch: 7, MaxRetryDelay: 200 * time.Millisecond, OnSent: onSent}); err != nil {
		t.Fatalf("Relay(%s): %v", dest, err)
	}
}

// drain receives every ready message of f.
func drain(t *testing.T, f broker.Transport) []*broker.Delivery {
	t.Helper()
	var all []*broker.Delivery
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		ds, err := f.Receive(ctx, 100)
		cancel()
		if err != nil {
			return all
		}
		all = append(all, ds...)
	}
}

func countRows(t *testing.T, b *testBundle, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.p.db.QueryRowContext(b.ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestOutboxFanOutRelayConsume: entries for two destinations commit with
// their registry rows; a rolled-back enqueue sends nothing; each relay
// publishes its destination's tickets once, with a stable AttrID; consumers
// with the Inbox process each message once even when it is published twice;
// with DeleteOnAck the object goes only after both subscribers released it.
func TestOutboxFanOutRelayConsume(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), &testOpts{store: claimcheck.Options{InlineThreshold: 16}})
		const n = 12
		var tickets []*claimcheck.Ticket
		for i := range n {
			res, err := b.p.Enqueue(b.ctx, "pages", "acme", strings.NewReader(fmt.Sprintf("payload %d %s", i, strings.Repeat("x", 100))),
				&EnqueueOptions{Destinations: []string{"billing", "search"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.JobIDs) != 2 || res.JobIDs[0] != res.JobID {
				t.Fatalf("JobIDs = %v, JobID %d", res.JobIDs, res.JobID)
			}
			tickets = append(tickets, res.Ticket)
		}
		// A rolled-back enqueue leaves no entry.
		tk, err := b.store.CheckIn(b.ctx, "acme", strings.NewReader("rolled back "+strings.Repeat("y", 64)), nil)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := b.p.DB().BeginTx(b.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.p.EnqueueTx(b.ctx, tx, "pages", tk, &EnqueueOptions{Destinations: []string{"billing"}}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := countRows(t, b, `SELECT COUNT(*) FROM claimcheck_claim WHERE role = 'payload'`); got != 2*n {
			t.Fatalf("registry rows = %d, want %d", got, 2*n)
		}
		// Pipeline workers never see outbox entries.
		rec := &recorder{}
		b.work(t, map[string]claimcheck.Handler{"pages": rec})
		if rec.count() != 0 {
			t.Fatalf("pipeline worker ran %d outbox entries", rec.count())
		}

		// The outage lasts three publishes, counted rather than timed, so
		// a slow machine cannot end it before the relay meets it.
		billing, search := &outageTransport{Fake: brokertest.NewFake(64 << 10), refuse: 3}, brokertest.NewFake(64<<10)
		var sentErrs atomic.Int64
		b.relay(t, "billing", billing, func(_ int64, err error) {
			if err != nil {
				sentErrs.Add(1)
			}
		})
		b.relay(t, "search", search, nil)
		if billing.refused.Load() == 0 || sentErrs.Load() == 0 {
			t.Fatalf("the outage stand-in refused %d publishes, OnSent saw %d errors: the outage was not exercised", billing.refused.Load(), sentErrs.Load())
		}
		if got := billing.published.Load(); got != n {
			t.Fatalf("billing: %d published after the outage, want %d (each entry once)", got, n)
		}
		if got := countRows(t, b, `SELECT COUNT(*) FROM river_job WHERE state = 'completed' AND queue LIKE 'claimcheck-outbox-%'`); got != 2*n {
			t.Fatalf("%d outbox entries completed, want %d", got, 2*n)
		}

		msgs := map[string][]*broker.Delivery{"billing": drain(t, billing), "search": drain(t, search)}
		for dest, ds := range msgs {
			if len(ds) != n {
				t.Fatalf("%s received %d messages, want %d", dest, len(ds), n)
			}
			ids := map[string]bool{}
			for _, d := range ds {
				id := d.Attributes[broker.AttrID]
				if !strings.HasPrefix(id, "cc-") || ids[id] || d.Attributes[broker.AttrJob] == "" || d.Attributes[broker.AttrKind] != "pages" {
					t.Fatalf("%s: message attributes %v", dest, d.Attributes)
				}
				ids[id] = true
				if int64(len(d.Body)) > claimcheck.MaxTicketBytes {
					t.Fatalf("%s: body of %d bytes is not a ticket", dest, len(d.Body))
				}
			}
			// Put the messages back, each twice: a duplicate publish.
			for _, d := range ds {
				m := broker.Message{Body: d.Body, Attributes: d.Attributes}
				tr := broker.Transport(search)
				if dest == "billing" {
					tr = billing.Fake
				}
				if err := tr.Publish(b.ctx, []broker.Message{m, m}); err != nil {
					t.Fatal(err)
				}
			}
		}

		// Consume billing: every object stays (search still refers to it).
		var runs sync.Map
		h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			v, _ := runs.LoadOrStore(job.ID, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			body, err := job.Payload.Open(ctx)
			if err != nil {
				return nil, err
			}
			defer body.Close()
			return &claimcheck.Result{Body: bytes.NewReader([]byte("ok")), ContentType: "text/plain"}, nil
		})
		consume := func(tr broker.Transport) (dups, deleted int) {
			ctx, cancel := context.WithCancel(b.ctx)
			defer cancel()
			var acked atomic.Int64
			var mu sync.Mutex
			done := make(chan error, 1)
			go func() {
				done <- broker.Consume(ctx, tr, b.store, broker.ConsumeOptions{
					Handlers: map[string]claimcheck.Handler{"pages": h}, Inbox: b.p.Inbox(), DeleteOnAck: b.p,
					OnDone: func(d *broker.Delivery, o broker.Outcome) {
						if o.Action != broker.Acked {
							t.Errorf("message %s: %s %v", o.ID, o.Action, o.Err)
						}
						mu.Lock()
						if o.Duplicate {
							dups++
						}
						if o.Deleted {
							deleted++
						}
						mu.Unlock()
						if acked.Add(1) == 2*n {
							cancel()
						}
					},
					OnError: func(err error) { t.Errorf("consume: %v", err) },
				})
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(workTimeout):
				t.Fatalf("consume: %d of %d settled", acked.Load(), 2*n)
			}
			return dups, deleted
		}
		if dups, deleted := consume(billing.Fake); dups != n || deleted != 0 {
			t.Fatalf("billing: %d duplicates suppressed (want %d), %d objects deleted (want 0)", dups, n, deleted)
		}
		for _, tk := range tickets {
			if info, err := b.store.Stat(b.ctx, tk); err != nil || !info.Exists {
				t.Fatalf("object of %s gone after the first subscriber's ack: %v", tk, err)
			}
		}
		if dups, deleted := consume(search); dups != n || deleted != n {
			t.Fatalf("search: %d duplicates suppressed (want %d), %d objects deleted (want %d)", dups, n, deleted, n)
		}
		for _, tk := range tickets {
			if info, err := b.store.Stat(b.ctx, tk); err != nil || info.Exists {
				t.Fatalf("object of %s kept after every subscriber released it: %v", tk, err)
			}
		}
		runs.Range(func(k, v any) bool {
			if c := v.(*atomic.Int64).Load(); c != 1 {
				t.Errorf("message %v handled %d times", k, c)
			}
			return true
		})
		entries := countRows(t, b, `SELECT COUNT(*) FROM claimcheck_consumed`)
		withResult := countRows(t, b, `SELECT COUNT(*) FROM claimcheck_consumed WHERE action = 'acked' AND result IS NOT NULL AND job_id > 0`)
		if entries != 2*n || withResult != 2*n {
			t.Fatalf("inbox: %d entries, %d acked with a result and a job, want %d", entries, withResult, 2*n)
		}
	})
}

func TestOutboxValidation(t *testing.T) {
	b := setup(t, dbtest.SQLite(t), nil)
	for _, opts := range []*EnqueueOptions{
		{Destinations: []string{"A"}},
		{Destinations: []string{"x"}},
		{Destinations: []string{"ok", "ok"}},
		{Destinations: []string{strings.Repeat("d", MaxDestinationLen+1)}},
	} {
		_, err := b.p.Enqueue(b.ctx, "pages", "acme", strings.NewReader("z"), opts)
		if !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("destinations %q: err = %v, want ErrTicketInvalid", opts.Destinations, err)
		}
	}
	// The longest destination still makes a queue name River accepts.
	longest := strings.Repeat("d", MaxDestinationLen)
	if _, err := b.p.Enqueue(b.ctx, "pages", "acme", strings.NewReader("z"), &EnqueueOptions{Destinations: []string{longest}}); err != nil {
		t.Errorf("a destination of %d bytes: %v", MaxDestinationLen, err)
	}
	if err := ValidateKind(outboxQueuePrefix + "billing"); err == nil {
		t.Error("a kind in the outbox's queue space was accepted")
	}
	if err := b.p.Relay(b.ctx, RelayOptions{Destination: "billing"}); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("relay without transport: %v", err)
	}
	if err := b.p.Relay(b.ctx, RelayOptions{Destination: "B!", Transport: brokertest.NewFake(1024)}); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("relay with a bad destination: %v", err)
	}
}

// MaxDestinationLen plus the outbox's prefix is River's 64-character queue
// name limit.
func TestMaxDestinationLen(t *testing.T) {
	if n := len(outboxQueue(strings.Repeat("d", MaxDestinationLen))); n != 64 {
		t.Fatalf("the longest outbox queue name is %d characters; River's limit is 64", n)
	}
}

// TestRelayReportsOtherBrokersEntries: a relay with UntilEmpty does not
// wait for entries bound to another broker, and still reports each to
// OnSent with ErrOtherBroker before it returns, even when it finishes
// before its River client has fetched them (it used to say nothing then,
// and TestOutboxEntryBoundToItsBroker failed at load 13).
func TestRelayReportsOtherBrokersEntries(t *testing.T) {
	b := setup(t, dbtest.SQLite(t), nil)
	var ids []int64
	for i := range 3 {
		res, err := b.p.Enqueue(b.ctx, "pages", "acme", strings.NewReader(fmt.Sprintf("bound %d", i)), &EnqueueOptions{Destinations: []string{"billing"}, Broker: "amqp://rabbit.example/?queue=billing"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	for round := range 3 {
		if round > 0 {
			// Entries the relay's River client will not fetch: what a
			// relay finishing first sees, deterministically.
			if _, err := b.p.db.ExecContext(b.ctx, `UPDATE river_job SET state = 'scheduled', scheduled_at = datetime('now', '+1 hour', 'subsec') WHERE queue = $1`, outboxQueue("billing")); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		left := map[int64]int{}
		ctx, cancel := context.WithTimeout(b.ctx, workTimeout)
		err := b.p.Relay(ctx, RelayOptions{Destination: "billing", Broker: "nats://nats.example/?subject=billing", Transport: brokertest.NewFake(1 << 20), UntilEmpty: true,
			OnSent: func(id int64, err error) {
				mu.Lock()
				defer mu.Unlock()
				if !errors.Is(err, ErrOtherBroker) {
					t.Errorf("entry %d: %v, want ErrOtherBroker", id, err)
				}
				left[id]++
			}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if left[id] != 1 {
				t.Errorf("round %d: entry %d reported %d times, want once: %v", round, id, left[id], left)
			}
		}
	}
	if empty, err := b.p.OutboxEmpty(b.ctx, "billing"); err != nil || empty {
		t.Fatalf("the bound entries left the outbox: empty %v, %v", empty, err)
	}
}

// fanOutTransport is an outage stand-in whose broker copies each message
// to two queues (broker.FanOut), so that the relay registers a payload
// reference per queue before each publish.
type fanOutTransport struct {
	*outageTransport
}

func (fanOutTransport) FanOutQueues() ([]string, error) { return []string{"fan:a", "fan:b"}, nil }

// TestRelayFanOutRegistersEachEntry: with a destination that fans out, a
// relay of many entries in flight (several registered per transaction)
// across an outage publishes every entry, each only after its registry
// holds one reference per queue and no longer the entry's single one.
func TestRelayFanOutRegistersEachEntry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), &testOpts{store: claimcheck.Options{InlineThreshold: 16}})
		const n = 60
		for i := range n {
			if _, err := b.p.Enqueue(b.ctx, "pages", "acme", strings.NewReader(fmt.Sprintf("fan-out payload %d %s", i, strings.Repeat("x", 100))),
				&EnqueueOptions{Destinations: []string{"fan"}}); err != nil {
				t.Fatal(err)
			}
		}
		tr := fanOutTransport{&outageTransport{Fake: brokertest.NewFake(64 << 10), refuse: 5}}
		var unregistered atomic.Int64
		tr.onPublish = func(msgs []broker.Message) {
			for _, m := range msgs {
				job := m.Attributes[broker.AttrJob]
				if countRows(t, b, `SELECT COUNT(*) FROM claimcheck_claim WHERE job_id = $1 AND role IN ('payload@fan:a', 'payload@fan:b')`, job) != 2 ||
					countRows(t, b, `SELECT COUNT(*) FROM claimcheck_claim WHERE job_id = $1 AND role = 'payload'`, job) != 0 {
					unregistered.Add(1)
				}
			}
		}
		ctx, cancel := context.WithTimeout(b.ctx, workTimeout)
		defer cancel()
		if err := b.p.Relay(ctx, RelayOptions{Destination: "fan", Transport: tr, UntilEmpty: true, Batch: 20, MaxRetryDelay: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if tr.refused.Load() == 0 {
			t.Fatal("the outage was not exercised")
		}
		if got := unregistered.Load(); got != 0 {
			t.Fatalf("%d publishes before the entry's fan-out registration", got)
		}
		ids := map[string]bool{}
		for _, d := range drain(t, tr) {
			ids[d.Attributes[broker.AttrJob]] = true
		}
		if len(ids) != n || tr.published.Load() != n {
			t.Fatalf("%d entries delivered in %d publishes, want %d each", len(ids), tr.published.Load(), n)
		}
		if got := countRows(t, b, `SELECT COUNT(*) FROM claimcheck_claim WHERE role LIKE 'payload@fan:%'`); got != 2*n {
			t.Fatalf("%d fan-out references, want %d", got, 2*n)
		}
		if got := countRows(t, b, `SELECT COUNT(*) FROM claimcheck_claim WHERE role = 'payload'`); got != 0 {
			t.Fatalf("%d single payload references left, want 0", got)
		}
	})
}

// TestRelayBatchesPublishes: the relay publishes the entries in flight in
// batches (at most relayPublishBatch per Publish call), not one call per
// entry: 200 entries take at most 0.15 calls each (21-22 calls, 0.105-0.110,
// on an idle machine; the first and last batches of a run are partial, so
// the 0.11 of ten entries per SendMessageBatch is reached on long runs;
// before batching it was 1.0). Then a message the transport refuses for good
// inside a batch dead-letters its own entry only.
func TestRelayBatchesPublishes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), &testOpts{store: claimcheck.Options{InlineThreshold: 4 << 10}})
		tr := brokertest.NewFake(2 << 10)
		// relay enqueues n entries (the one at index big too large for
		// the transport, if big >= 0), relays them, and returns the
		// Publish calls, the messages they carried and the big entry's id.
		relay := func(n, big int) (calls, messages int64, bigID int64) {
			for i := range n {
				body := fmt.Sprintf("batched payload %d", i)
				if i == big {
					body = strings.Repeat("x", 3<<10) // inline: its ticket exceeds the transport's limit
				}
				res, err := b.p.Enqueue(b.ctx, "pages", "acme", strings.NewReader(body), &EnqueueOptions{Destinations: []string{"batch"}})
				if err != nil {
					t.Fatal(err)
				}
				if i == big {
					bigID = res.JobID
				}
			}
			var c, m atomic.Int64
			ctx, cancel := context.WithTimeout(b.ctx, workTimeout)
			defer cancel()
			err := b.p.Relay(ctx, RelayOptions{Destination: "batch", Transport: tr, UntilEmpty: true, MaxRetryDelay: 200 * time.Millisecond,
				OnPublish: func(k int, _ error) {
					c.Add(1)
					m.Add(int64(k))
					if k > relayPublishBatch {
						t.Errorf("a Publish call of %d messages, want at most %d", k, relayPublishBatch)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			return c.Load(), m.Load(), bigID
		}

		const n = 200
		calls, messages, _ := relay(n, -1)
		perEntry := float64(calls) / n
		t.Logf("%d entries: %d Publish calls (%.3f per entry), %d messages", n, calls, perEntry, messages)
		if got := len(drain(t, tr)); got != n || messages != n {
			t.Errorf("%d messages delivered, %d handed to the transport, want %d", got, messages, n)
		}
		if perEntry > 0.15 {
			t.Errorf("%.3f Publish calls per entry, want at most 0.15", perEntry)
		}

		_, _, tooBig := relay(30, 17)
		if got := len(drain(t, tr)); got != 29 {
			t.Errorf("%d messages delivered, want 29 (all but the entry too large for the transport)", got)
		}
		j, err := b.p.Get(b.ctx, tooBig)
		if err != nil || !j.Dead || j.Reason != ReasonNotRelayable {
			t.Errorf("the entry too large for the transport: %+v (%v), want dead %s", j, err, ReasonNotRelayable)
		}
	})
}

// TestRelayAWSFormat: a destination declared format=aws is relayed as AWS
// payload pointers, each to a copy of the payload that only its message
// names (inline payloads included), with the legacy marker when asked,
// of data type Number, and the relay's attributes; the entries complete.
func TestRelayAWSFormat(t *testing.T) {
	b := setup(t, dbtest.SQLite(t), nil)
	payloads := map[string][]byte{}
	for _, n := range []int{1 << 10, 300 << 10} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte('a' + i%26)
		}
		res, err := b.p.Enqueue(b.ctx, "pages", "acme", bytes.NewReader(p), &EnqueueOptions{Destinations: []string{"aws"}})
		if err != nil {
			t.Fatal(err)
		}
		payloads[strconv.FormatInt(res.JobID, 10)] = p
	}
	format, err := broker.FormatOf("sqs://?queue_url=http://127.0.0.1:1/q&dead_letter_queue_url=http://127.0.0.1:1/d&format=aws&pointer_bucket=acme-bucket&pointer_marker=SQSLargePayloadSize")
	if err != nil {
		t.Fatal(err)
	}
	tr := brokertest.NewFake(256 << 10)
	ctx, cancel := context.WithTimeout(b.ctx, workTimeout)
	defer cancel()
	if err := b.p.Relay(ctx, RelayOptions{Destination: "aws", Transport: tr, UntilEmpty: true, Format: format,
		OnSent: func(id int64, err error) {
			if err != nil {
				t.Errorf("entry %d: %v", id, err)
			}
		}}); err != nil {
		t.Fatal(err)
	}
	ds := drain(t, tr)
	if len(ds) != len(payloads) {
		t.Fatalf("%d messages, want %d", len(ds), len(payloads))
	}
	for _, d := range ds {
		want := payloads[d.Attributes[broker.AttrJob]]
		p, err := broker.ParsePointer(d.Body, d.Attributes)
		if err != nil {
			t.Fatalf("not an AWS payload pointer: %v (body %.80s)", err, d.Body)
		}
		sum := sha256.Sum256(want)
		if p.Bucket != "acme-bucket" || !claimcheck.PointerKey(p.Key) || p.Marker != broker.AttrLegacyPayloadSize || d.AttributeType(p.Marker) != broker.AttrNumber ||
			p.Size != int64(len(want)) || p.SHA256 != hex.EncodeToString(sum[:]) || p.Tenant != "acme" ||
			d.Attributes[broker.AttrKind] != "pages" || d.Attributes[broker.AttrIdempotencyKey] == "" || d.Attributes[broker.AttrMaxAttempts] == "" {
			t.Fatalf("pointer %+v, attributes %v, types %v", p, d.Attributes, d.Types)
		}
		got, err := b.store.Bucket().ReadAll(b.ctx, p.Key)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("the pointed object: %d bytes, %v; want the %d bytes enqueued", len(got), err, len(want))
		}
		t.Logf("job %s: body %s; attributes %v", d.Attributes[broker.AttrJob], strings.Replace(string(d.Body), p.Key[len(p.Key)-28:], "…", 1), d.Attributes)
	}
	if empty, err := b.p.OutboxEmpty(b.ctx, "aws"); err != nil || !empty {
		t.Fatalf("outbox empty %v, %v", empty, err)
	}
}

// Package brokertest is the conformance suite every broker.Transport must
// pass. Transport tests call RunConformance with a constructor that gives
// each subtest its own, freshly created queue (and removes it at cleanup).
package brokertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// RetryDelay is the delay the suite asks Retry for.
const RetryDelay = 1 * time.Second

// RunConformance runs the suite. newTransport must return a transport on a
// queue of its own, empty, and register its own cleanup with t.Cleanup.
// Dead-letter checks need the transport to implement
// broker.DeadLetterReader; without it they are skipped.
func RunConformance(t *testing.T, newTransport func(t *testing.T) broker.Transport) {
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, newTransport(t)) })
	t.Run("SizeAccounting", func(t *testing.T) { testSize(t, newTransport(t)) })
	t.Run("RetryRedeliversAfterDelay", func(t *testing.T) { testRetry(t, newTransport(t)) })
	t.Run("DeadLetterWithReason", func(t *testing.T) { testDeadLetter(t, newTransport(t)) })
	t.Run("ConsumeEndToEnd", func(t *testing.T) { testConsume(t, newTransport(t)) })
	t.Run("DuplicateProcessedOnce", func(t *testing.T) { testDuplicate(t, newTransport(t)) })
	t.Run("ReplayDeliveredOnce", func(t *testing.T) { testReplay(t, newTransport(t)) })
	t.Run("ReleaseSpendsNoAttempt", func(t *testing.T) { testRelease(t, newTransport(t)) })
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// receiveN receives until n deliveries arrived or within is over.
func receiveN(t *testing.T, recv func(context.Context, int) ([]*broker.Delivery, error), n int, within time.Duration) []*broker.Delivery {
	t.Helper()
	ctx := ctxFor(t, within)
	var out []*broker.Delivery
	for len(out) < n {
		ds, err := recv(ctx, n-len(out))
		if err != nil {
			t.Fatalf("received %d of %d deliveries: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	return out
}

// expectNone asserts nothing is received within d.
func expectNone(t *testing.T, recv func(context.Context, int) ([]*broker.Delivery, error), d time.Duration) {
	t.Helper()
	ds, err := recv(ctxFor(t, d), 10)
	if err == nil {
		t.Fatalf("expected no delivery, got %d (first %q)", len(ds), ds[0].Body)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive on an empty queue: %v, want the context's deadline", err)
	}
}

func testRoundTrip(t *testing.T, tr broker.Transport) {
	ctx := ctxFor(t, 30*time.Second)
	msgs := make([]broker.Message, 3)
	for i := range msgs {
		msgs[i] = broker.Message{Body: fmt.Appendf(nil, "body-%d", i), Attributes: map[string]string{"claimcheck-kind": "roundtrip", "n": fmt.Sprint(i), "utf8": "é€"}}
	}
	// Publish returns after confirmation: every message is then receivable.
	if err := tr.Publish(ctx, msgs); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	ds := receiveN(t, tr.Receive, 3, 10*time.Second)
	seen := map[string]bool{}
	for _, d := range ds {
		n := d.Attributes["n"]
		if want := "body-" + n; string(d.Body) != want {
			t.Errorf("delivery n=%s: body %q, want %q", n, d.Body, want)
		}
		if d.Attributes["claimcheck-kind"] != "roundtrip" || d.Attributes["utf8"] != "é€" {
			t.Errorf("delivery n=%s: attributes %v", n, d.Attributes)
		}
		if d.Attempt != 1 {
			t.Errorf("delivery n=%s: attempt %d, want 1", n, d.Attempt)
		}
		if d.ID == "" {
			t.Errorf("delivery n=%s: empty ID", n)
		}
		seen[n] = true
		if err := tr.Ack(ctx, d); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("received %v, want n=0,1,2 once each", seen)
	}
	expectNone(t, tr.Receive, 500*time.Millisecond)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := tr.Publish(cctx, msgs[:1]); err == nil {
		t.Errorf("Publish with a cancelled context succeeded")
	}
}

func testSize(t *testing.T, tr broker.Transport) {
	ctx := ctxFor(t, 30*time.Second)
	max := tr.MaxMessageSize()
	if max <= 0 {
		t.Fatalf("MaxMessageSize %d, want > 0", max)
	}
	attrs := map[string]string{"claimcheck-kind": "size"}
	overhead := broker.Size(broker.Message{Attributes: attrs})
	if want := int64(len("claimcheck-kind") + len("String") + len("size")); overhead != want {
		t.Fatalf("Size of the attributes = %d, want %d", overhead, want)
	}
	exact := broker.Message{Body: bytes.Repeat([]byte("a"), int(max-overhead)), Attributes: attrs}
	over := broker.Message{Body: bytes.Repeat([]byte("a"), int(max-overhead+1)), Attributes: attrs}
	small := broker.Message{Body: []byte("small"), Attributes: attrs}
	// An oversized message anywhere in a batch fails it before anything is
	// sent: the small one must not arrive.
	err := tr.Publish(ctx, []broker.Message{small, over})
	if !errors.Is(err, broker.ErrMessageTooLarge) {
		t.Fatalf("Publish of %d bytes (max %d): %v, want ErrMessageTooLarge", broker.Size(over), max, err)
	}
	expectNone(t, tr.Receive, 500*time.Millisecond)
	if err := tr.Publish(ctx, []broker.Message{exact}); err != nil {
		t.Fatalf("Publish of exactly %d bytes: %v", max, err)
	}
	ds := receiveN(t, tr.Receive, 1, 10*time.Second)
	if int64(len(ds[0].Body)) != max-overhead {
		t.Errorf("received body of %d bytes, want %d", len(ds[0].Body), max-overhead)
	}
	if err := tr.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
}

func testRetry(t *testing.T, tr broker.Transport) {
	ctx := ctxFor(t, 30*time.Second)
	if err := tr.Publish(ctx, []broker.Message{{Body: []byte("again"), Attributes: map[string]string{"claimcheck-kind": "retry"}}}); err != nil {
		t.Fatal(err)
	}
	d := receiveN(t, tr.Receive, 1, 10*time.Second)[0]
	start := time.Now()
	if err := tr.Retry(ctx, d, RetryDelay); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	expectNone(t, tr.Receive, RetryDelay/2)
	d2 := receiveN(t, tr.Receive, 1, 10*RetryDelay)[0]
	if el := time.Since(start); el < RetryDelay {
		t.Errorf("redelivered after %v, before the delay %v", el, RetryDelay)
	}
	if d2.Attempt != d.Attempt+1 || string(d2.Body) != "again" || d2.Attributes["claimcheck-kind"] != "retry" {
		t.Errorf("redelivery: attempt %d body %q attrs %v; want attempt %d, same body and attributes", d2.Attempt, d2.Body, d2.Attributes, d.Attempt+1)
	}
	if d2.ID != d.ID {
		t.Logf("note: ID changed across retry (%s → %s)", d.ID, d2.ID)
	}
	if err := tr.Ack(ctx, d2); err != nil {
		t.Fatal(err)
	}
	expectNone(t, tr.Receive, 500*time.Millisecond)
}

func deadReader(t *testing.T, tr broker.Transport) broker.DeadLetterReader {
	dr, ok := tr.(broker.DeadLetterReader)
	if !ok {
		t.Skip("transport does not implement broker.DeadLetterReader")
	}
	return dr
}

func testDeadLetter(t *testing.T, tr broker.Transport) {
	dr := deadReader(t, tr)
	ctx := ctxFor(t, 30*time.Second)
	if err := tr.Publish(ctx, []broker.Message{{Body: []byte("doomed"), Attributes: map[string]string{"claimcheck-kind": "dead", "keep": "me"}}}); err != nil {
		t.Fatal(err)
	}
	d := receiveN(t, tr.Receive, 1, 10*time.Second)[0]
	if err := tr.DeadLetter(ctx, d, "test-reason"); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	dd := receiveN(t, dr.ReceiveDead, 1, 10*time.Second)[0]
	if string(dd.Body) != "doomed" || dd.Attributes[broker.AttrReason] != "test-reason" || dd.Attributes["keep"] != "me" {
		t.Errorf("dead letter: body %q attributes %v; want body doomed, reason test-reason, keep=me", dd.Body, dd.Attributes)
	}
	if err := tr.Ack(ctx, dd); err != nil {
		t.Fatal(err)
	}
	expectNone(t, tr.Receive, 500*time.Millisecond)
}

type outcome struct {
	d *broker.Delivery
	o broker.Outcome
}

func testConsume(t *testing.T, tr broker.Transport) {
	dr := deadReader(t, tr)
	ctx := ctxFor(t, 60*time.Second)
	dir := t.TempDir()
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "objects")), &claimcheck.Options{
		SpoolDir: filepath.Join(dir, "spool"), AlwaysOffload: true, MaxMessageSize: tr.MaxMessageSize(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	pdf, err := os.ReadFile(filepath.Join("..", "testdata", "pdf", "pixel.pdf"))
	if err != nil {
		pdf, err = os.ReadFile(filepath.Join("..", "..", "testdata", "pdf", "pixel.pdf"))
	}
	if err != nil {
		t.Fatalf("test PDF: %v", err)
	}
	checkIn := func(body []byte) *claimcheck.Ticket {
		tk, err := store.CheckIn(ctx, "acme", bytes.NewReader(body), &claimcheck.CheckInOptions{ContentType: "application/pdf"})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	good := checkIn(pdf)
	gone := checkIn(append(append([]byte{}, pdf...), "\n% deleted"...))
	if err := store.Bucket().Delete(ctx, gone.Key); err != nil {
		t.Fatal(err)
	}
	flaky := checkIn(append(append([]byte{}, pdf...), "\n% flaky"...))
	var msgs []broker.Message
	for _, kt := range []struct {
		kind string
		tk   *claimcheck.Ticket
	}{{"pdf", good}, {"pdf", gone}, {"flaky", flaky}} {
		m, err := broker.NewMessage(kt.kind, kt.tk)
		if err != nil {
			t.Fatal(err)
		}
		if s := broker.Size(m); s > tr.MaxMessageSize() {
			t.Fatalf("ticket message of %d bytes exceeds %d", s, tr.MaxMessageSize())
		}
		msgs = append(msgs, m)
	}
	malformed := broker.Message{Body: []byte(`{"v":1,"tenant":`), Attributes: map[string]string{broker.AttrKind: "pdf"}}
	msgs = append(msgs, malformed)
	if err := tr.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}

	const maxAttempts = 3
	pdfHandler := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		r, err := job.Payload.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		if !bytes.HasPrefix(b, []byte("%PDF")) {
			return nil, claimcheck.Permanent(errors.New("not a PDF"))
		}
		return &claimcheck.Result{Body: strings.NewReader(fmt.Sprintf("%d bytes", len(b))), ContentType: "text/plain"}, nil
	})
	flakyHandler := claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
		return nil, errors.New("flaky: try again")
	})
	var mu sync.Mutex
	var got []outcome
	doneCh := make(chan struct{}, 64)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- broker.Consume(cctx, tr, store, broker.ConsumeOptions{
			Handlers: map[string]claimcheck.Handler{"pdf": pdfHandler, "flaky": flakyHandler},
			Policy:   claimcheck.RetryPolicy{MaxAttempts: maxAttempts, Base: 200 * time.Millisecond}, Batch: 4,
			OnDone: func(d *broker.Delivery, o broker.Outcome) {
				mu.Lock()
				got = append(got, outcome{d, o})
				mu.Unlock()
				doneCh <- struct{}{}
			},
		})
	}()
	// good acked, gone and malformed dead at once, flaky 2 retries + dead.
	const want = 1 + 1 + 1 + maxAttempts
	for n := 0; n < want; n++ {
		select {
		case <-doneCh:
		case <-ctx.Done():
			mu.Lock()
			t.Fatalf("only %d of %d outcomes: %+v", len(got), want, got)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	byKey := map[string][]outcome{}
	for _, g := range got {
		tk, _ := claimcheck.ParseTicket(g.d.Body)
		k := "malformed"
		if tk != nil {
			k = tk.SHA256
		}
		byKey[k] = append(byKey[k], g)
	}
	check := func(name string, os []outcome, attempts []int, last broker.Action, reason string) {
		t.Helper()
		if len(os) != len(attempts) {
			t.Errorf("%s: %d outcomes, want %d: %+v", name, len(os), len(attempts), os)
			return
		}
		for i, o := range os {
			if o.o.Attempt != attempts[i] || o.d.Attempt != attempts[i] {
				t.Errorf("%s: outcome %d attempt %d, want %d", name, i, o.o.Attempt, attempts[i])
			}
			wantAction := broker.Retried
			if i == len(os)-1 {
				wantAction = last
			}
			if o.o.Action != wantAction {
				t.Errorf("%s: outcome %d action %s (err %v), want %s", name, i, o.o.Action, o.o.Err, wantAction)
			}
		}
		if l := os[len(os)-1].o; l.Reason != reason {
			t.Errorf("%s: reason %q, want %q (err %v)", name, l.Reason, reason, l.Err)
		}
	}
	check("good", byKey[good.SHA256], []int{1}, broker.Acked, "")
	check("missing", byKey[gone.SHA256], []int{1}, broker.DeadLettered, claimcheck.ReasonPayloadMissing)
	check("malformed", byKey["malformed"], []int{1}, broker.DeadLettered, claimcheck.ReasonTicketInvalid)
	check("flaky", byKey[flaky.SHA256], []int{1, 2, 3}, broker.DeadLettered, claimcheck.ReasonTransient)
	if os := byKey[good.SHA256]; len(os) == 1 {
		rt := os[0].o.Result
		if rt == nil {
			t.Errorf("good: no result ticket")
		} else {
			p, err := store.Claim(rt)
			if err != nil {
				t.Fatal(err)
			}
			r, err := p.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r)
			r.Close()
			p.Close()
			if want := fmt.Sprintf("%d bytes", len(pdf)); string(b) != want {
				t.Errorf("result %q, want %q", b, want)
			}
		}
	}
	// The dead-letter destination holds exactly the three dead letters.
	dead := receiveN(t, dr.ReceiveDead, 3, 10*time.Second)
	reasons := map[string]int{}
	for _, d := range dead {
		reasons[d.Attributes[broker.AttrReason]]++
		if err := tr.Ack(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	wantReasons := map[string]int{claimcheck.ReasonPayloadMissing: 1, claimcheck.ReasonTicketInvalid: 1, claimcheck.ReasonTransient: 1}
	if fmt.Sprint(reasons) != fmt.Sprint(wantReasons) {
		t.Errorf("dead-letter reasons %v, want %v", reasons, wantReasons)
	}
	expectNone(t, dr.ReceiveDead, 300*time.Millisecond)
	expectNone(t, tr.Receive, 300*time.Millisecond)
}

// NewMemInbox returns an in-process broker.Inbox, for tests of Consume
// without a job database (the real one, pipeline.Pipeline.Inbox, keeps it
// there): it records acknowledged messages and counts releases per
// delivery.
func NewMemInbox() broker.Inbox { return &memInbox{done: map[string]bool{}} }

// memInbox is NewMemInbox's inbox.
type memInbox struct {
	mu       sync.Mutex
	done     map[string]bool
	released map[string]int // queue, id and delivery → releases
}

func (m *memInbox) Seen(_ context.Context, queue, id, delivery string) (broker.Seen, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return broker.Seen{Processed: m.done[queue+"\n"+id], Released: m.released[queue+"\n"+id+"\n"+delivery]}, nil
}

func (m *memInbox) Record(_ context.Context, o broker.Outcome) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch o.Action {
	case broker.Acked:
		m.done[o.Queue+"\n"+o.ID] = true
	case broker.Released:
		if m.released == nil {
			m.released = map[string]int{}
		}
		m.released[o.Queue+"\n"+o.ID+"\n"+o.Delivery]++
	}
	return nil
}

// testDuplicate publishes one message twice with the same broker.AttrID
// (a relay whose confirmation was lost publishes again): the transport
// either drops the copy (JetStream's duplicate window) or delivers it, and
// Consume with an Inbox runs the handler once either way; the id reaches
// the delivery unchanged.
func testDuplicate(t *testing.T, tr broker.Transport) {
	ctx := ctxFor(t, 30*time.Second)
	store := FileStore(t, nil)
	m := Message(t, store, "dup", "published twice")
	const id = "cc-0123456789abcdef0123456789abcdef"
	m.Attributes[broker.AttrID] = id
	for range 2 {
		if err := tr.Publish(ctx, []broker.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	var runs, settled, dups int
	var mu sync.Mutex
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// Stop once nothing more arrives.
		for {
			time.Sleep(1500 * time.Millisecond)
			mu.Lock()
			n := settled
			mu.Unlock()
			if n >= 1 {
				time.Sleep(1500 * time.Millisecond)
				cancel()
				return
			}
		}
	}()
	err := broker.Consume(cctx, tr, store, broker.ConsumeOptions{
		Inbox: &memInbox{done: map[string]bool{}},
		Handlers: map[string]claimcheck.Handler{"dup": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			mu.Lock()
			runs++
			mu.Unlock()
			return nil, nil
		})},
		OnDone: func(d *broker.Delivery, o broker.Outcome) {
			mu.Lock()
			defer mu.Unlock()
			settled++
			if o.Duplicate {
				dups++
			}
			if d.Attributes[broker.AttrID] != id || o.ID != id || o.Action != broker.Acked {
				t.Errorf("delivery: id attribute %q, outcome id %q, action %s", d.Attributes[broker.AttrID], o.ID, o.Action)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs != 1 || settled < 1 || settled > 2 || dups != settled-1 {
		t.Fatalf("handler ran %d times over %d deliveries (%d suppressed as duplicates); want once", runs, settled, dups)
	}
	expectNone(t, tr.Receive, 300*time.Millisecond)
}

// testReplay dead-letters a message, then publishes its replay the way the
// relay does (a new broker.AttrID, the same broker.AttrIdempotencyKey) at
// once, well inside any duplicate window (JetStream's, SQS FIFO's): the
// replay is delivered and its handler runs once; the original published
// again after that is dropped by the broker or acked by the Inbox as a
// duplicate, without running the handler.
func testReplay(t *testing.T, tr broker.Transport) {
	ctx := ctxFor(t, 60*time.Second)
	store := FileStore(t, nil)
	tk, err := store.CheckIn(ctx, "acme", strings.NewReader("replayed"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const key = "cc-replay0123456789abcdef01234567"
	msg := func(id string) broker.Message {
		m, err := broker.NewMessage("replay", tk)
		if err != nil {
			t.Fatal(err)
		}
		m.Attributes[broker.AttrID] = id
		m.Attributes[broker.AttrIdempotencyKey] = key
		return m
	}
	inbox := &memInbox{done: map[string]bool{}}
	var mu sync.Mutex
	var runs int
	var outcomes []broker.Outcome
	handlers := map[string]claimcheck.Handler{"replay": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		runs++
		if runs == 1 {
			return nil, claimcheck.Permanent(errors.New("bad the first time"))
		}
		return nil, nil
	})}
	// consume works until n outcomes are in (at most within), then for
	// quiet more.
	consume := func(n int, within, quiet time.Duration) {
		t.Helper()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			errc <- broker.Consume(cctx, tr, store, broker.ConsumeOptions{
				Inbox: inbox, Handlers: handlers,
				OnDone: func(_ *broker.Delivery, o broker.Outcome) {
					mu.Lock()
					outcomes = append(outcomes, o)
					mu.Unlock()
				},
			})
		}()
		deadline := time.Now().Add(within)
		for {
			mu.Lock()
			got := len(outcomes)
			mu.Unlock()
			if got >= n || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(quiet)
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Publish(ctx, []broker.Message{msg(key)}); err != nil {
		t.Fatal(err)
	}
	consume(1, 20*time.Second, 0)
	if err := tr.Publish(ctx, []broker.Message{msg(key + "-2")}); err != nil {
		t.Fatal(err)
	}
	consume(2, 20*time.Second, 0)
	if err := tr.Publish(ctx, []broker.Message{msg(key)}); err != nil {
		t.Fatal(err)
	}
	// JetStream drops it (its duplicate window); the others deliver it.
	consume(3, 3*time.Second, 500*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(outcomes) < 2 || outcomes[0].Action != broker.DeadLettered || outcomes[1].Action != broker.Acked || outcomes[1].Duplicate {
		t.Fatalf("outcomes %+v: want dead-lettered, then the replay acked", outcomes)
	}
	for _, o := range outcomes {
		if o.ID != key {
			t.Errorf("outcome id %q, want the idempotency key %q", o.ID, key)
		}
	}
	for _, o := range outcomes[2:] {
		if o.Action != broker.Acked || !o.Duplicate {
			t.Errorf("the original published again: %s (duplicate %t), want acked as a duplicate", o.Action, o.Duplicate)
		}
	}
	if runs != 2 {
		t.Fatalf("handler ran %d times, want 2 (the failure, then the replay once)", runs)
	}
	if dr, ok := tr.(broker.DeadLetterReader); ok {
		ds := receiveN(t, dr.ReceiveDead, 1, 10*time.Second)
		for _, d := range ds {
			if err := tr.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	expectNone(t, tr.Receive, 300*time.Millisecond)
}

// testRelease stops a consumer twice while its handler runs (a drain
// deadline: Drain closed, then the context cancelled): the running
// delivery and those received but not started go back to the queue
// (broker.Released) each time, and a third consumer works every message
// on attempt 1, its Job.Attempt and Outcome.Attempt alike, though the
// broker has delivered it up to three times.
func testRelease(t *testing.T, tr broker.Transport) {
	ctx := ctxFor(t, 3*time.Minute) // the last phase may wait out a lease
	store := FileStore(t, nil)
	var msgs []broker.Message
	for i := range 3 {
		tk, err := store.CheckIn(ctx, "acme", strings.NewReader(fmt.Sprintf("released %d", i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := broker.NewMessage("rel", tk)
		if err != nil {
			t.Fatal(err)
		}
		m.Attributes[broker.AttrID] = fmt.Sprintf("cc-release-%d-0123456789abcdef", i)
		msgs = append(msgs, m)
	}
	if err := tr.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	inbox := &memInbox{done: map[string]bool{}}
	for round := 1; round <= 2; round++ {
		started := make(chan struct{})
		var once sync.Once
		var mu sync.Mutex
		var outcomes []broker.Outcome
		cctx, cancel := context.WithCancel(ctx)
		drain := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			errc <- broker.Consume(cctx, tr, store, broker.ConsumeOptions{
				Inbox: inbox, Drain: drain,
				Handlers: map[string]claimcheck.Handler{"rel": claimcheck.HandlerFunc(func(hctx context.Context, j *claimcheck.Job) (*claimcheck.Result, error) {
					once.Do(func() { close(started) })
					<-hctx.Done()
					return nil, hctx.Err()
				})},
				OnDone: func(_ *broker.Delivery, o broker.Outcome) { mu.Lock(); outcomes = append(outcomes, o); mu.Unlock() },
			})
		}()
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: no delivery reached the handler", round)
		}
		close(drain)
		time.Sleep(200 * time.Millisecond)
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(outcomes) == 0 {
			t.Fatalf("round %d: no outcome", round)
		}
		for _, o := range outcomes {
			if o.Action != broker.Released || o.Attempt != 1 {
				t.Errorf("round %d: outcome %s on attempt %d, want released on attempt 1", round, o.Action, o.Attempt)
			}
		}
		mu.Unlock()
	}
	// A transport whose pull request the client gave up on while the
	// broker still answered it (natsjs: a pull outliving nats.go's wait
	// under heavy load) gets that delivery back only after its lease, as a
	// new attempt (docs of broker.Leaser). Such a late message is allowed
	// one more attempt; every other must be acked on attempt 1.
	lease := time.Duration(0)
	if l, ok := tr.(broker.Leaser); ok {
		if d, err := l.Lease(ctx); err == nil {
			lease = d
		}
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	arrived := map[string]time.Duration{}
	var outcomes []broker.Outcome
	began := time.Now()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- broker.Consume(cctx, tr, store, broker.ConsumeOptions{
			Inbox: inbox,
			Handlers: map[string]claimcheck.Handler{"rel": claimcheck.HandlerFunc(func(_ context.Context, j *claimcheck.Job) (*claimcheck.Result, error) {
				mu.Lock()
				attempts[j.ID] = j.Attempt
				arrived[j.ID] = time.Since(began)
				mu.Unlock()
				return nil, nil
			})},
			OnDone: func(_ *broker.Delivery, o broker.Outcome) { mu.Lock(); outcomes = append(outcomes, o); mu.Unlock() },
		})
	}()
	for deadline := time.Now().Add(45*time.Second + lease); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(outcomes)
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after two releases: %d of 3 messages worked", n)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, o := range outcomes {
		want := 1
		if lease > 0 && arrived[o.ID] >= lease {
			want = 2
			t.Logf("message %s came back after the lease (%v): a pull the client gave up on", o.ID, arrived[o.ID].Round(time.Second))
		}
		if o.Action != broker.Acked || o.Attempt > want || attempts[o.ID] != o.Attempt {
			t.Errorf("message %s: %s on attempt %d (handler saw %d), want acked on attempt 1", o.ID, o.Action, o.Attempt, attempts[o.ID])
		}
	}
	expectNone(t, tr.Receive, 300*time.Millisecond)
}

// Message checks body in to store for tenant "acme" and returns the
// message of kind that carries its ticket (broker.NewMessage), failing t
// on an error.
func Message(t testing.TB, store *claimcheck.Store, kind, body string) broker.Message {
	t.Helper()
	tk, err := store.CheckIn(t.Context(), "acme", strings.NewReader(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := broker.NewMessage(kind, tk)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// FileStore opens a store over a file:// bucket in a fresh temporary
// directory, closed when t ends; opts may be nil (SpoolDir is set).
func FileStore(t testing.TB, opts *claimcheck.Options) *claimcheck.Store {
	t.Helper()
	dir := t.TempDir()
	o := claimcheck.Options{}
	if opts != nil {
		o = *opts
	}
	o.SpoolDir = filepath.Join(dir, "spool")
	store, err := claimcheck.OpenStore(t.Context(), "file://"+filepath.ToSlash(filepath.Join(dir, "objects")), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// ServerURL returns the broker URL in the environment variable env, or
// skips the test, saying to set it (example is a URL that works on a
// development machine); under CI (CI set) it fails the test instead.
func ServerURL(t testing.TB, env, example string) string {
	t.Helper()
	return testenv.Require(t, env, "set it to that broker's URL, e.g. "+example)
}

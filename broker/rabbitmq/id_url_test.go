package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/rabbitmq"
)

// TestAttrIDIsMessageID: broker.AttrID becomes the AMQP message-id and
// Delivery.ID, also after a Retry; a message-id set by another producer
// is Delivery.ID; an AttrID too long for a message-id is still Delivery.ID.
func TestAttrIDIsMessageID(t *testing.T) {
	raw := amqpURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tr := newTransport(t).(*rabbitmq.Transport)

	const id = "outbox-42/7f3c"
	long := strings.Repeat("L", 300) // over AMQP's 255-byte message-id
	kind := map[string]string{broker.AttrKind: "id"}
	withID := func(body, id string) broker.Message {
		return broker.Message{Body: []byte(body), Attributes: map[string]string{broker.AttrKind: "id", broker.AttrID: id}}
	}
	if err := tr.Publish(ctx, []broker.Message{withID("with-id", id)}); err != nil {
		t.Fatal(err)
	}

	// On the wire: the AMQP message-id property itself.
	conn, err := amqp.Dial(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var got amqp.Delivery
	for deadline := time.Now().Add(5 * time.Second); ; {
		d, ok, err := ch.Get(tr.Queue(), false)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = d
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("published message not in the queue")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got.MessageId != id {
		t.Errorf("AMQP message-id %q, want the AttrID %q", got.MessageId, id)
	}
	if err := got.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	// Another producer's message with a message-id and no AttrID.
	if err := ch.PublishWithContext(ctx, "", tr.Queue(), false, false, amqp.Publishing{
		MessageId: "foreign-1", Body: []byte("foreign"), Headers: amqp.Table{broker.AttrKind: "id"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(ctx, []broker.Message{withID("long-id", long), {Body: []byte("no-id"), Attributes: kind}}); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{"with-id": id, "foreign": "foreign-1", "long-id": long}
	seen := map[string]*broker.Delivery{}
	for len(seen) < 4 {
		ds, err := tr.Receive(ctx, 4)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, d := range ds {
			seen[string(d.Body)] = d
		}
	}
	for body, d := range seen {
		if w, ok := want[body]; ok && d.ID != w {
			t.Errorf("%s: Delivery.ID %.40q, want %.40q", body, d.ID, w)
		}
		if d.ID == "" {
			t.Errorf("%s: empty Delivery.ID", body)
		}
	}
	if seen["no-id"].ID == seen["with-id"].ID || seen["no-id"].ID == seen["long-id"].ID {
		t.Errorf("a message without AttrID got another message's ID %q", seen["no-id"].ID)
	}

	// Retry keeps the ID.
	if err := tr.Retry(ctx, seen["with-id"], 0); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"foreign", "long-id", "no-id"} {
		if err := tr.Ack(ctx, seen[body]); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := tr.Receive(ctx, 1)
	if err != nil {
		t.Fatalf("receive the retried message: %v", err)
	}
	if ds[0].ID != id || string(ds[0].Body) != "with-id" {
		t.Errorf("retried %q: Delivery.ID %q, want %q", ds[0].Body, ds[0].ID, id)
	}
	if err := tr.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentPublish: many goroutines publishing at once (as the outbox
// relay does) all get their confirms, and every message arrives once.
func TestConcurrentPublish(t *testing.T) {
	amqpURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tr := newTransport(t)
	const goroutines, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			msgs := bodiesOf(fmt.Sprintf("g%d", g), each)
			if err := tr.Publish(ctx, msgs); err != nil {
				errs <- fmt.Errorf("goroutine %d: %w", g, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[string]int{}
	for n := 0; n < goroutines*each; {
		ds, err := tr.Receive(ctx, 32)
		if err != nil {
			t.Fatalf("received %d of %d: %v", n, goroutines*each, err)
		}
		for _, d := range ds {
			seen[string(d.Body)]++
			n++
			if err := tr.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	for body, c := range seen {
		if c != 1 {
			t.Errorf("%s received %d times", body, c)
		}
	}
	if len(seen) != goroutines*each {
		t.Errorf("%d distinct messages, want %d", len(seen), goroutines*each)
	}
}

// TestOpenURL opens through broker.Open with the query parameters.
func TestOpenURL(t *testing.T) {
	raw := amqpURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal("CLAIMCHECK_TEST_AMQP_URL does not parse")
	}
	name := fmt.Sprintf("cctest.url.%d", time.Now().UnixNano())
	q := u.Query()
	q.Set("queue", name)
	q.Set("max_message_size", "1000")
	q.Set("prefetch", "4")
	q.Set("heartbeat", "5") // amqp091-go's own: passed on
	u.RawQuery = q.Encode()
	btr, err := broker.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("broker.Open(%s): %v", u.Redacted(), err)
	}
	tr, ok := btr.(*rabbitmq.Transport)
	if !ok {
		t.Fatalf("broker.Open returned a %T", btr)
	}
	t.Cleanup(func() {
		if err := tr.DeleteTopology(); err != nil {
			t.Errorf("delete topology: %v", err)
		}
		tr.Close()
	})
	if tr.Queue() != name || tr.MaxMessageSize() != 1000 {
		t.Errorf("queue %q, max message size %d; want %q, 1000", tr.Queue(), tr.MaxMessageSize(), name)
	}
	if err := tr.Publish(ctx, bodiesOf("url", 1)); err != nil {
		t.Fatal(err)
	}
	ds, err := tr.Receive(ctx, 1)
	if err != nil || string(ds[0].Body) != "url-0" {
		t.Fatalf("receive: %v %v", ds, err)
	}
	if err := tr.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
}

// TestOpenURLErrors needs no broker: refused parameters are ErrConfig, an
// unreachable broker ErrUnavailable, and no error shows the password.
func TestOpenURLErrors(t *testing.T) {
	const pw = "pw-S3cr3t"
	if !slices.Contains(broker.Schemes(), "amqp") || !slices.Contains(broker.Schemes(), "amqps") {
		t.Fatalf("schemes %v, want amqp and amqps registered", broker.Schemes())
	}
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	base := "amqp://user:" + pw + "@" + closed + "/"
	for _, c := range []struct {
		url   string
		class error
		want  string // in the error
	}{
		{base + "?queue=q&bogus=1", claimcheck.ErrConfig, `"bogus"`},
		{base + "?queue=q&Queue=x", claimcheck.ErrConfig, `"Queue"`},
		{base + "?queue=q&max_message_size=abc", claimcheck.ErrConfig, "max_message_size"},
		{base + "?queue=q&max_message_size=0", claimcheck.ErrConfig, "max_message_size"},
		{base + "?queue=q&prefetch=-1", claimcheck.ErrConfig, "prefetch"},
		{base + "?queue=q&prefetch=70000", claimcheck.ErrConfig, "prefetch"},
		{base + "?queue=a&queue=b", claimcheck.ErrConfig, "queue"},
		{base + "?queue=amq.x", claimcheck.ErrConfig, "queue"},
		{base, claimcheck.ErrConfig, "missing required parameter queue"},
		{base + "?queue=q&heartbeat=x", claimcheck.ErrConfig, "heartbeat"},
		{"amqps://user:" + pw + "@" + closed + "/?queue=q&max_message_size=12x", claimcheck.ErrConfig, "max_message_size"},
		{base + "?queue=q&connection_timeout=2000", claimcheck.ErrUnavailable, closed},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		tr, err := broker.Open(ctx, c.url)
		cancel()
		if err == nil {
			tr.Close()
			t.Errorf("%s: opened", strings.ReplaceAll(c.url, pw, "…"))
			continue
		}
		if !errors.Is(err, c.class) {
			t.Errorf("%s: %v, want %v", strings.ReplaceAll(c.url, pw, "…"), err, c.class)
		}
		if c.class != claimcheck.ErrConfig && errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("%s: %v is also ErrConfig", strings.ReplaceAll(c.url, pw, "…"), err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q does not mention %s", strings.ReplaceAll(c.url, pw, "…"), err, c.want)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("error shows the password: %s", strings.ReplaceAll(err.Error(), pw, "<PASSWORD>"))
		}
	}
	// Open itself, with a URL that does not parse.
	_, err = rabbitmq.Open(t.Context(), "amqp://user:"+pw+"@host:port/", rabbitmq.Options{Queue: "q"})
	if !errors.Is(err, claimcheck.ErrConfig) || strings.Contains(err.Error(), pw) {
		t.Errorf("Open with an unparsable URL: %v, want ErrConfig without the password", strings.ReplaceAll(fmt.Sprint(err), pw, "<PASSWORD>"))
	}
}

package natsjs_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/natsjs"
)

// streamConfig reads a stream's configuration from the server on a
// connection of its own.
func streamConfig(t *testing.T, stream string) jetstream.StreamConfig {
	t.Helper()
	nc, err := nats.Connect(natsURL(t), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	return s.CachedInfo().Config
}

// receiveAll receives and acks until a Receive of quiet finds nothing.
func receiveAll(t *testing.T, ctx context.Context, tr broker.Transport, quiet time.Duration) []*broker.Delivery {
	t.Helper()
	var all []*broker.Delivery
	for {
		rctx, cancel := context.WithTimeout(ctx, quiet)
		ds, err := tr.Receive(rctx, 10)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return all
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, d := range ds {
			if err := tr.Ack(ctx, d); err != nil {
				t.Fatalf("ack %s: %v", d.ID, err)
			}
		}
		all = append(all, ds...)
	}
}

// TestDuplicateIDDeliveredOnce: a message published twice with one AttrID
// (in two calls, and twice in one call) is confirmed every time and
// delivered once, with that AttrID as its ID; messages without AttrID are
// not deduplicated.
func TestDuplicateIDDeliveredOnce(t *testing.T) {
	opts := uniqueOptions(t)
	opts.FetchWait = 300 * time.Millisecond
	tr := open(t, opts)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	if got := streamConfig(t, opts.Stream).Duplicates; got != natsjs.DefaultDuplicateWindow {
		t.Errorf("stream duplicate window %v, want %v", got, natsjs.DefaultDuplicateWindow)
	}
	if got := streamConfig(t, opts.Stream+"_DEAD").Duplicates; got != natsjs.DefaultDuplicateWindow {
		t.Errorf("dead-letter stream duplicate window %v, want %v", got, natsjs.DefaultDuplicateWindow)
	}

	id := "outbox-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	dup := broker.Message{Body: []byte("dup"), Attributes: map[string]string{broker.AttrKind: "k", broker.AttrID: id}}
	plain := broker.Message{Body: []byte("plain"), Attributes: map[string]string{broker.AttrKind: "k"}}
	for i, batch := range [][]broker.Message{{dup, plain}, {dup}, {plain, dup}} {
		if err := tr.Publish(ctx, batch); err != nil {
			t.Fatalf("publish #%d: %v", i, err)
		}
	}

	var dups, plains []*broker.Delivery
	for _, d := range receiveAll(t, ctx, tr, 1500*time.Millisecond) {
		switch string(d.Body) {
		case "dup":
			dups = append(dups, d)
		case "plain":
			plains = append(plains, d)
		default:
			t.Errorf("unexpected body %q", d.Body)
		}
	}
	if len(dups) != 1 {
		t.Fatalf("%d deliveries of the message published three times with %s %q, want 1", len(dups), broker.AttrID, id)
	}
	if d := dups[0]; d.ID != id || d.Attributes[broker.AttrID] != id || d.Attempt != 1 {
		t.Errorf("delivery ID %q, attribute %q, attempt %d; want ID and attribute %q, attempt 1", d.ID, d.Attributes[broker.AttrID], d.Attempt, id)
	}
	if len(plains) != 2 {
		t.Fatalf("%d deliveries of two messages without %s, want 2", len(plains), broker.AttrID)
	}
	if plains[0].ID == plains[1].ID || plains[0].ID == "" || plains[0].ID == id {
		t.Errorf("IDs of messages without %s: %q, %q", broker.AttrID, plains[0].ID, plains[1].ID)
	}

	// An AttrID too long to carry twice is refused before anything is sent.
	long := broker.Message{Body: []byte("x"), Attributes: map[string]string{broker.AttrID: strings.Repeat("i", natsjs.MaxIDLen+1)}}
	if err := tr.Publish(ctx, []broker.Message{long}); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("publish with a %d-byte %s: %v, want ErrConfig", natsjs.MaxIDLen+1, broker.AttrID, err)
	}
}

// TestDuplicateWindowOption: Options.DuplicateWindow is the streams'
// duplicate window; a negative one is refused.
func TestDuplicateWindowOption(t *testing.T) {
	u := natsURL(t)
	opts := uniqueOptions(t)
	opts.DuplicateWindow = 30 * time.Second
	tr := open(t, opts)
	if got := tr.Options().DuplicateWindow; got != 30*time.Second {
		t.Errorf("Options().DuplicateWindow %v", got)
	}
	if got := streamConfig(t, opts.Stream).Duplicates; got != 30*time.Second {
		t.Errorf("stream duplicate window %v, want 30s", got)
	}
	bad := uniqueOptions(t)
	bad.DuplicateWindow = -time.Second
	if _, err := natsjs.Open(t.Context(), u, bad); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("negative DuplicateWindow: %v, want ErrConfig", err)
	}
}

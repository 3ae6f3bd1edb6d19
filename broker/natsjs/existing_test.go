package natsjs_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/natsjs"
)

// jetStream returns a JetStream context on a connection of its own, closed
// at the end of the test.
func jetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(natsURL(t), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// deleteStreams deletes the named streams at the end of the test, for
// streams no Transport of the test deletes.
func deleteStreams(t *testing.T, js jetstream.JetStream, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, n := range names {
			if err := js.DeleteStream(ctx, n); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("delete stream %s: %v", n, err)
			}
		}
	})
}

func streamExists(t *testing.T, js jetstream.JetStream, name string) bool {
	t.Helper()
	_, err := js.Stream(t.Context(), name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return true
}

// wantRefused checks that err wraps ErrConfig and names every one of
// words.
func wantRefused(t *testing.T, what string, err error, words ...string) {
	t.Helper()
	if !errors.Is(err, claimcheck.ErrConfig) {
		t.Fatalf("%s: %v, want ErrConfig", what, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not name %q", what, err, w)
		}
	}
	t.Logf("%s: %v", what, err)
}

// TestRefuseSubjectChange: opening an existing stream (main or dead-letter)
// with another subject, or an existing stream whose retention differs, is
// ErrConfig naming the stream and both settings, and changes nothing.
func TestRefuseSubjectChange(t *testing.T) {
	u := natsURL(t)
	js := jetStream(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := uniqueOptions(t)
	tr := open(t, opts)
	if err := tr.Publish(ctx, []broker.Message{{Body: []byte("kept"), Attributes: map[string]string{broker.AttrKind: "k"}}}); err != nil {
		t.Fatal(err)
	}
	before := streamConfig(t, opts.Stream)
	beforeDead := streamConfig(t, opts.Stream+"_DEAD")

	// Options with another subject for the same stream.
	other := opts
	other.Subject = opts.Subject + ".other"
	_, err := natsjs.Open(ctx, u, other)
	wantRefused(t, "other subject", err, opts.Stream, `"`+opts.Subject+`"`, `"`+other.Subject+`"`)

	// The same through a URL, as the user did it.
	q := url.Values{"stream": {opts.Stream}, "subject": {"cctest.other"}}
	bt, err := broker.Open(ctx, withQuery(t, q.Encode()))
	if err == nil {
		bt.Close()
	}
	wantRefused(t, "other subject in the URL", err, opts.Stream, opts.Subject, "cctest.other")

	// A new stream whose dead-letter stream exists with another subject:
	// refused before the new stream is created.
	fresh := uniqueOptions(t)
	fresh.DeadStream = opts.Stream + "_DEAD"
	deleteStreams(t, js, fresh.Stream)
	_, err = natsjs.Open(ctx, u, fresh)
	wantRefused(t, "other dead-letter subject", err, fresh.DeadStream, opts.Subject+".dead", fresh.Subject+".dead")
	if streamExists(t, js, fresh.Stream) {
		t.Errorf("stream %s was created although its dead-letter stream was refused", fresh.Stream)
	}

	// Nothing changed: configurations, and the message is still there.
	if after := streamConfig(t, opts.Stream); !slices.Equal(after.Subjects, before.Subjects) || after.Retention != before.Retention ||
		after.Storage != before.Storage || after.Duplicates != before.Duplicates {
		t.Errorf("stream changed: %+v, was %+v", after, before)
	}
	if after := streamConfig(t, opts.Stream+"_DEAD"); !slices.Equal(after.Subjects, beforeDead.Subjects) {
		t.Errorf("dead-letter stream subjects %q, were %q", after.Subjects, beforeDead.Subjects)
	}
	if got := streamConfig(t, opts.Stream).Subjects; !slices.Equal(got, []string{opts.Subject}) {
		t.Errorf("stream subjects %q, want [%q]", got, opts.Subject)
	}
	ds, err := tr.Receive(ctx, 1)
	if err != nil || len(ds) != 1 || string(ds[0].Body) != "kept" {
		t.Fatalf("receive after the refused opens: %v %v", ds, err)
	}
	if err := tr.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}

	// An existing stream with the right subject but limits retention
	// (created by someone else): refused, not converted.
	lim := uniqueOptions(t)
	lim.Subject = ""
	deleteStreams(t, js, lim.Stream, lim.Stream+"_DEAD")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: lim.Stream, Subjects: []string{natsjs.DefaultSubject(lim.Stream)},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.MemoryStorage,
	}); err != nil {
		t.Fatal(err)
	}
	_, err = natsjs.Open(ctx, u, lim)
	wantRefused(t, "limits retention", err, lim.Stream, "retention", "storage")
	if c := streamConfig(t, lim.Stream); c.Retention != jetstream.LimitsPolicy || c.Storage != jetstream.MemoryStorage {
		t.Errorf("stream changed: %+v", c)
	}
	if streamExists(t, js, lim.Stream+"_DEAD") {
		t.Errorf("dead-letter stream created although the main stream was refused")
	}
}

// TestReopenSameSettings: opening an existing topology again with the same
// settings works and keeps settings claimcheck does not set; a different
// duplicate window is applied.
func TestReopenSameSettings(t *testing.T) {
	js := jetStream(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := uniqueOptions(t)
	first := open(t, opts)

	// An operator adds a limit claimcheck does not set.
	cfg := streamConfig(t, opts.Stream)
	cfg.MaxMsgs = 12345
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	again := open(t, opts)
	c := streamConfig(t, opts.Stream)
	if !slices.Equal(c.Subjects, []string{opts.Subject}) || c.MaxMsgs != 12345 || c.Duplicates != natsjs.DefaultDuplicateWindow {
		t.Errorf("after reopening: %+v", c)
	}
	// Both transports work on the one queue.
	if err := first.Publish(ctx, []broker.Message{{Body: []byte("x"), Attributes: map[string]string{broker.AttrKind: "k"}}}); err != nil {
		t.Fatal(err)
	}
	ds, err := again.Receive(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %v", ds, err)
	}
	if err := again.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}

	// A different duplicate window is applied to both streams, the rest
	// kept.
	win := opts
	win.DuplicateWindow = 40 * time.Second
	open(t, win)
	for _, s := range []string{opts.Stream, opts.Stream + "_DEAD"} {
		if c := streamConfig(t, s); c.Duplicates != 40*time.Second {
			t.Errorf("%s: duplicate window %v, want 40s", s, c.Duplicates)
		}
	}
	if c := streamConfig(t, opts.Stream); c.MaxMsgs != 12345 || !slices.Equal(c.Subjects, []string{opts.Subject}) {
		t.Errorf("after a new duplicate window: %+v", c)
	}
}

// TestDefaultSubjectPerStream: two stream names with default subjects
// open side by side (Options and URL), each with the subject derived from
// its name, and are separate queues.
func TestDefaultSubjectPerStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	a, b := uniqueOptions(t), uniqueOptions(t)
	b.Stream += "_b"
	a.Subject, b.Subject = "", ""
	ta, tb := open(t, a), open(t, b)
	for _, tr := range []*natsjs.Transport{ta, tb} {
		o := tr.Options()
		if want := natsjs.DefaultSubject(o.Stream); o.Subject != want || o.DeadSubject != want+".dead" {
			t.Errorf("%s: subjects %q, %q; want %q", o.Stream, o.Subject, o.DeadSubject, want)
		}
		if got := streamConfig(t, o.Stream).Subjects; !slices.Equal(got, []string{o.Subject}) {
			t.Errorf("%s: stream subjects %q", o.Stream, got)
		}
	}

	// A third through a URL naming only the stream.
	c := uniqueOptions(t)
	c.Stream += "_c"
	bt, err := broker.Open(ctx, withQuery(t, url.Values{"stream": {c.Stream}}.Encode()))
	if err != nil {
		t.Fatalf("broker.Open with stream=%s only: %v", c.Stream, err)
	}
	tc := bt.(*natsjs.Transport)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tc.DeleteTopology(ctx); err != nil {
			t.Errorf("delete topology: %v", err)
		}
		tc.Close()
	})
	if got, want := tc.Options().Subject, natsjs.DefaultSubject(c.Stream); got != want {
		t.Errorf("URL transport subject %q, want %q", got, want)
	}

	// Separate queues: each receives only its own message.
	trs := []*natsjs.Transport{ta, tb, tc}
	for _, tr := range trs {
		m := broker.Message{Body: []byte(tr.Options().Stream), Attributes: map[string]string{broker.AttrKind: "k"}}
		if err := tr.Publish(ctx, []broker.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range trs {
		ds := receiveAll(t, ctx, tr, time.Second)
		if len(ds) != 1 || string(ds[0].Body) != tr.Options().Stream {
			t.Errorf("%s received %d messages, want its own one", tr.Options().Stream, len(ds))
		}
	}
}

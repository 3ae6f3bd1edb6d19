package natsjs_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/natsjs"
)

// withQuery returns the test server's URL with query q.
func withQuery(t *testing.T, q string) string {
	t.Helper()
	u, err := url.Parse(natsURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = q
	return u.String()
}

// TestOpenURL: broker.Open with the "nats" scheme applies the query
// parameters, and the transport works.
func TestOpenURL(t *testing.T) {
	o := uniqueOptions(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	q := url.Values{
		"stream": {o.Stream}, "subject": {o.Subject}, "consumer": {"c1"},
		"max_message_size": {"65536"}, "max_deliver": {"7"}, "ack_wait": {"90s"}, "duplicate_window": {"45s"},
	}
	bt, err := broker.Open(ctx, withQuery(t, q.Encode()))
	if err != nil {
		t.Fatalf("broker.Open: %v", err)
	}
	tr, ok := bt.(*natsjs.Transport)
	if !ok {
		t.Fatalf("broker.Open returned %T", bt)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tr.DeleteTopology(ctx); err != nil {
			t.Errorf("delete topology: %v", err)
		}
		tr.Close()
	})
	got := tr.Options()
	if got.Stream != o.Stream || got.Subject != o.Subject || got.Consumer != "c1" || got.MaxMessageSize != 65536 ||
		got.MaxDeliver != 7 || got.AckWait != 90*time.Second || got.DuplicateWindow != 45*time.Second {
		t.Errorf("options from the URL: %+v", got)
	}
	if d := streamConfig(t, o.Stream).Duplicates; d != 45*time.Second {
		t.Errorf("stream duplicate window %v, want 45s", d)
	}
	if err := tr.Publish(ctx, []broker.Message{{Body: []byte("via url"), Attributes: map[string]string{broker.AttrKind: "k"}}}); err != nil {
		t.Fatal(err)
	}
	ds, err := tr.Receive(ctx, 1)
	if err != nil || len(ds) != 1 || string(ds[0].Body) != "via url" {
		t.Fatalf("receive: %v %v", ds, err)
	}
	if err := tr.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
}

// TestOpenURLErrors: an unknown parameter or a bad value is ErrConfig
// naming the parameter, and no error string contains the URL's password or
// token.
func TestOpenURLErrors(t *testing.T) {
	natsURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const secret = "s3cretPW-b7f1"
	withSecret := func(q string) string {
		u, err := url.Parse(withQuery(t, q))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword("alice", secret)
		return u.String()
	}
	for _, c := range []struct{ url, name string }{
		{withQuery(t, "bogus=1"), "bogus"},
		{withQuery(t, "max_deliver=0"), "max_deliver"},
		{withQuery(t, "ack_wait=10"), "ack_wait"},
		{withQuery(t, "duplicate_window=soon"), "duplicate_window"},
		{withQuery(t, "max_message_size=-5"), "max_message_size"},
		{withQuery(t, "stream=has.dot"), "stream"},
		{withSecret("token=" + secret), "token"},
		{withSecret("ack_wait=forever"), "ack_wait"},
	} {
		tr, err := broker.Open(ctx, c.url)
		if err == nil {
			tr.Close()
			t.Errorf("%s: opened, want ErrConfig", c.name)
			continue
		}
		if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v, want ErrConfig naming it", c.name, err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}

	// A server that cannot be reached: ErrUnavailable, no password or
	// token in the error, whether the URL goes through broker.Open or
	// straight to Open (where nats.go reports a URL it cannot parse with
	// the URL in full).
	for _, raw := range []string{
		"nats://alice:" + secret + "@127.0.0.1:1",
		"nats://" + secret + "@127.0.0.1:1/?stream=S",
	} {
		_, err := broker.Open(ctx, raw)
		if !errors.Is(err, claimcheck.ErrUnavailable) {
			t.Errorf("unreachable server: %v, want ErrUnavailable", err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
	_, err := natsjs.Open(ctx, "nats://alice:"+secret+"%zz@127.0.0.1:4222", uniqueOptions(t))
	if !errors.Is(err, claimcheck.ErrConfig) || strings.Contains(err.Error(), secret) {
		t.Errorf("unparsable URL: %v, want ErrConfig without the password", err)
	}
	t.Logf("unparsable URL: %v", err)
}

package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/rabbitmq"
	"github.com/claimcheck/claimcheck/internal/outageproxy"
)

// A broker that falls silent (the proxy stops passing what RabbitMQ sends:
// a partition) is noticed within three heartbeat intervals, amqp091-go's
// read deadline: a publish waiting for its confirm fails with
// claimcheck.ErrUnavailable instead of waiting for ever, and once the
// broker answers again the transport reconnects.
func TestSilentBrokerFailsWithinHeartbeats(t *testing.T) {
	raw := amqpURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	target, via := proxiedURL(t, raw)
	proxy := outageproxy.New(t, target)
	name := fmt.Sprintf("cctest.silent.%d", time.Now().UnixNano())
	u := via(proxy.Addr())
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	tr, err := rabbitmq.Open(ctx, u+sep+"heartbeat=1", rabbitmq.Options{Queue: name, DialTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.Restore()
		if err := tr.DeleteTopology(); err != nil {
			t.Errorf("delete topology: %v", err)
		}
		tr.Close()
	})
	proxy.Freeze()
	start := time.Now()
	err = tr.Publish(ctx, []broker.Message{{Body: []byte("silent")}})
	elapsed := time.Since(start)
	if !errors.Is(err, claimcheck.ErrUnavailable) {
		t.Fatalf("publish to a silent broker: %v after %v, want ErrUnavailable", err, elapsed)
	}
	if elapsed > 10*time.Second {
		t.Fatalf("publish to a silent broker failed after %v; heartbeat=1 bounds it at about 3 s", elapsed)
	}
	t.Logf("publish to a silent broker failed after %v: %v", elapsed, err)
	proxy.Restore()
	for {
		err := tr.Publish(ctx, []broker.Message{{Body: []byte("back")}})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("publish once the broker answers again: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/broker/rabbitmq"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// TestChaosPostgresKilledBroker is TestChaosPostgresKilled through
// RabbitMQ: the jobs go through the outbox and the relay to a queue, and
// the consumer records each message in the inbox on the private
// PostgreSQL, killed with -9 five times for 20-30 s while 100 jobs with
// results over 64 KiB flow. The consumer holds a finished delivery for
// 10 s (Retry.Window) before it gives up and lets the broker redeliver
// it, shorter than each outage: a handler that finished while the
// database was gone has its outcome kept in the store
// (broker.OutcomeKeeper), and the redelivery is settled from it. No
// message is lost, none dead, no handler runs twice.
func TestChaosPostgresKilledBroker(t *testing.T) {
	requireChaos(t)
	amqpURL := brokertest.ServerURL(t, "CLAIMCHECK_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	pg := testenv.StartPrivatePG(t)
	const (
		jobs  = 100
		kills = 5
	)
	b := setup(t, pg.URL(), &testOpts{cfg: Config{MaxConns: 20,
		Retry: claimcheck.RetryPolicy{Base: 100 * time.Millisecond, MaxDelay: 2 * time.Second, Window: 10 * time.Second}}})
	queue := "chaos-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tr, err := rabbitmq.Open(b.ctx, amqpURL, rabbitmq.Options{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	for i := range jobs {
		if _, err := b.p.Enqueue(b.ctx, "chaos", "acme", bytes.NewReader([]byte("payload "+strconv.Itoa(i))), &EnqueueOptions{Destinations: []string{"chaosq"}}); err != nil {
			t.Fatal(err)
		}
	}
	counter := &chaosCounter{runs: map[string]int{}}
	h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		counter.run(job.ID)
		time.Sleep(time.Duration(1000+rand.IntN(2000)) * time.Millisecond)
		body := bytes.Repeat([]byte(job.ID+" "), (65<<10)/(len(job.ID)+1)+1) // > 64 KiB
		return &claimcheck.Result{Body: bytes.NewReader(body)}, nil
	})
	var mu sync.Mutex
	acked := map[string]bool{}
	var dead, fromKept atomic.Int32
	ctx, cancel := context.WithTimeout(b.ctx, 12*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- b.p.Work(ctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"chaos": h}, Concurrency: 4, DrainTimeout: time.Minute,
			Notify: func(msg string) { t.Log("work:", msg) },
			Broker: &BrokerSource{Transport: tr, Relay: "chaosq",
				OnError: func(err error) { t.Log("consume:", err) },
				OnSettled: func(o broker.Outcome) {
					switch o.Action {
					case broker.Acked:
						mu.Lock()
						acked[o.ID] = true
						mu.Unlock()
						if o.FromOutcome {
							fromKept.Add(1)
						}
					case broker.DeadLettered:
						dead.Add(1)
						t.Errorf("message %s dead-lettered: %v", o.ID, o.Err)
					}
				},
				Until: func(context.Context) (bool, error) {
					mu.Lock()
					defer mu.Unlock()
					return len(acked) >= jobs, nil
				}}})
	}()
	restarted := killPostgres(t, pg, counter, kills, jobs)
	if err := <-errc; err != nil {
		t.Errorf("Work: %v", err)
	}
	recovered := time.Since(restarted)
	mu.Lock()
	lost := jobs - len(acked)
	mu.Unlock()
	if lost > 0 {
		t.Errorf("%d of %d messages never acknowledged", lost, jobs)
	}
	dups := counter.check(t)
	t.Logf("%d messages settled from an outcome kept in the store, handler not run again", fromKept.Load())
	fmt.Printf("CHAOS|postgres-kill9-rabbitmq|%d|%d|%d|%d|%.0f\n", jobs, lost, dups, dead.Load(), recovered.Seconds())
}

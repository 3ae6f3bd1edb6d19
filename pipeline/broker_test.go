package pipeline

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// TestWorkBrokerUntilEmptyWaitsForRetries: with UntilEmpty, a broker
// worker does not return while a delivery it sent back with a delay (a
// transient failure's backoff, here about a second, far beyond Idle) is
// still to come back: it waits, works it again, and only then returns.
func TestWorkBrokerUntilEmptyWaitsForRetries(t *testing.T) {
	b := setup(t, dbtest.SQLite(t), &testOpts{cfg: Config{Retry: claimcheck.RetryPolicy{Base: time.Second}}})
	tr := brokertest.NewFake(1 << 20)
	tk, err := b.store.CheckIn(b.ctx, "acme", strings.NewReader("retried once"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := broker.NewMessage("flaky", tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(b.ctx, []broker.Message{m}); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	var outcomes []broker.Outcome
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	start := time.Now()
	err = b.p.Work(ctx, WorkOptions{UntilEmpty: true, Concurrency: 1,
		Handlers: map[string]claimcheck.Handler{"flaky": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			if runs.Add(1) == 1 {
				return nil, errors.New("first try fails (transient)")
			}
			return nil, nil
		})},
		Broker: &BrokerSource{Transport: tr, Idle: 200 * time.Millisecond, OnSettled: func(o broker.Outcome) { outcomes = append(outcomes, o) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if runs.Load() != 2 || len(outcomes) != 2 || outcomes[0].Action != broker.Retried || outcomes[1].Action != broker.Acked {
		t.Fatalf("after %v: handler ran %d times, outcomes %+v; want retried, then acked", took, runs.Load(), outcomes)
	}
	t.Logf("retried after %v, acked; Work returned after %v", outcomes[0].Delay.Round(time.Millisecond), took.Round(time.Millisecond))
}

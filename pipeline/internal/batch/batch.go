// Package batch gathers concurrent callers' requests into batches, one
// call serving many (the relay's publishes and its fan-out registry writes,
// package pipeline).
package batch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimcheck/claimcheck"
)

// Batcher gathers the requests of concurrent callers (a relay's entries in
// flight, each on its own River goroutine) into batches of at most max,
// handed to flush by workers goroutines. A batch holds every request
// waiting when it is formed, and, when linger is set and it is not full,
// those arriving within linger after its first: one call serves many
// entries (one transaction, one broker request) instead of one each.
// flush must answer every request of its batch exactly once (Req.Done).
type Batcher[T any] struct {
	max    int
	linger time.Duration
	flush  func([]*Req[T])
	reqs   chan *Req[T]
	stop   chan struct{}
	wg     sync.WaitGroup
	closed sync.Once

	// accepted counts the requests the collector has taken in (tests
	// read it to know a request is in a batch).
	accepted atomic.Int64
}

// Req is one caller's request, v in ctx; its outcome goes to Done.
type Req[T any] struct {
	Ctx  context.Context
	V    T
	Done chan error
}

// ErrStopped is a request refused after Stop (claimcheck.ErrUnavailable).
var ErrStopped = fmt.Errorf("pipeline: relay: stopping: %w", claimcheck.ErrUnavailable)

// New starts a batcher; Stop it after its last request.
func New[T any](max, workers int, linger time.Duration, flush func([]*Req[T])) *Batcher[T] {
	b := &Batcher[T]{max: max, linger: linger, flush: flush, reqs: make(chan *Req[T]), stop: make(chan struct{})}
	batches := make(chan []*Req[T])
	b.wg.Add(1 + workers)
	go func() {
		defer b.wg.Done()
		defer close(batches)
		b.collect(batches)
	}()
	for range workers {
		go func() {
			defer b.wg.Done()
			for batch := range batches {
				b.flush(batch)
			}
		}()
	}
	return b
}

// collect forms batches until Stop. A batch formed while every worker is
// busy keeps taking requests until a worker takes it or it is full: under
// load, batches leave full (fewer broker calls per entry), and no request
// waits longer than it would have waited for a worker anyway.
func (b *Batcher[T]) collect(batches chan<- []*Req[T]) {
	for {
		var batch []*Req[T]
		select {
		case req := <-b.reqs:
			b.accepted.Add(1)
			batch = append(batch, req)
		case <-b.stop:
			return
		}
		var linger <-chan time.Time
		var timer *time.Timer
		if b.linger > 0 {
			timer = time.NewTimer(b.linger)
			linger = timer.C
		}
	more:
		for len(batch) < b.max {
			if linger == nil {
				select {
				case req := <-b.reqs:
					b.accepted.Add(1)
					batch = append(batch, req)
				default:
					break more
				}
				continue
			}
			select {
			case req := <-b.reqs:
				b.accepted.Add(1)
				batch = append(batch, req)
			case <-linger:
				break more
			case <-b.stop:
				break more
			}
		}
		if timer != nil {
			timer.Stop()
		}
	hand:
		for {
			var in <-chan *Req[T] // nil (never ready) once the batch is full
			if len(batch) < b.max {
				in = b.reqs
			}
			select {
			case batches <- batch:
				break hand
			case req := <-in:
				b.accepted.Add(1)
				batch = append(batch, req)
			case <-b.stop:
				for _, req := range batch {
					req.Done <- ErrStopped
				}
				return
			}
		}
	}
}

// Do hands v to the batcher and returns its outcome once its batch is
// flushed, or ctx's error (wrapped with what) when ctx ends first.
func (b *Batcher[T]) Do(ctx context.Context, what string, v T) error {
	req := &Req[T]{Ctx: ctx, V: v, Done: make(chan error, 1)}
	select {
	case b.reqs <- req:
	case <-ctx.Done():
		return fmt.Errorf("pipeline: relay: %s: %w", what, ctx.Err())
	case <-b.stop:
		return ErrStopped
	}
	select {
	case err := <-req.Done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("pipeline: relay: %s: %w", what, ctx.Err())
	}
}

// Stop ends the batcher's goroutines once the batches being flushed are
// done; a request after it fails with ErrStopped.
func (b *Batcher[T]) Stop() {
	if b == nil {
		return
	}
	b.closed.Do(func() { close(b.stop) })
	b.wg.Wait()
}

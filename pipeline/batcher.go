package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/claimcheck/claimcheck"
)

// batcher gathers the requests of concurrent callers (a relay's entries in
// flight, each on its own River goroutine) into batches of at most max,
// handed to flush by workers goroutines. A batch holds every request
// waiting when it is formed, and, when linger is set and it is not full,
// those arriving within linger after its first: one call serves many
// entries (one transaction, one broker request) instead of one each.
// flush must answer every request of its batch exactly once (req.done).
type batcher[T any] struct {
	max    int
	linger time.Duration
	flush  func([]*batchReq[T])
	reqs   chan *batchReq[T]
	stop   chan struct{}
	wg     sync.WaitGroup
	closed sync.Once
}

// batchReq is one caller's request; its outcome goes to done.
type batchReq[T any] struct {
	ctx  context.Context
	v    T
	done chan error
}

// errBatcherStopped is a request refused after Stop.
var errBatcherStopped = fmt.Errorf("pipeline: relay: stopping: %w", claimcheck.ErrUnavailable)

// newBatcher starts a batcher; Stop it after its last request.
func newBatcher[T any](max, workers int, linger time.Duration, flush func([]*batchReq[T])) *batcher[T] {
	b := &batcher[T]{max: max, linger: linger, flush: flush, reqs: make(chan *batchReq[T]), stop: make(chan struct{})}
	batches := make(chan []*batchReq[T])
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

// collect forms batches until Stop. While every worker is busy, requests
// wait in line and the next batch takes them all (up to max).
func (b *batcher[T]) collect(batches chan<- []*batchReq[T]) {
	for {
		var batch []*batchReq[T]
		select {
		case req := <-b.reqs:
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
					batch = append(batch, req)
				default:
					break more
				}
				continue
			}
			select {
			case req := <-b.reqs:
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
		select {
		case batches <- batch:
		case <-b.stop:
			for _, req := range batch {
				req.done <- errBatcherStopped
			}
			return
		}
	}
}

// do hands v to the batcher and returns its outcome once its batch is
// flushed, or ctx's error (wrapped with what) when ctx ends first.
func (b *batcher[T]) do(ctx context.Context, what string, v T) error {
	req := &batchReq[T]{ctx: ctx, v: v, done: make(chan error, 1)}
	select {
	case b.reqs <- req:
	case <-ctx.Done():
		return fmt.Errorf("pipeline: relay: %s: %w", what, ctx.Err())
	case <-b.stop:
		return errBatcherStopped
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("pipeline: relay: %s: %w", what, ctx.Err())
	}
}

// Stop ends the batcher's goroutines once the batches being flushed are
// done; a request after it fails with errBatcherStopped.
func (b *batcher[T]) Stop() {
	if b == nil {
		return
	}
	b.closed.Do(func() { close(b.stop) })
	b.wg.Wait()
}

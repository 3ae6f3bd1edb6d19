package batch

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestBatchFillsWhileWorkersBusy: requests that arrive while the only
// worker is busy join the batch waiting for it, up to max, instead of
// queueing one batch of one each behind it (the relay's publish calls per
// entry under load).
func TestBatchFillsWhileWorkersBusy(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := New(3, 1, 0, func(batch []*Req[int]) {
		mu.Lock()
		sizes = append(sizes, len(batch))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release // the worker is busy with the first batch
		}
		for _, r := range batch {
			r.Done <- nil
		}
	})
	defer b.Stop()
	var wg sync.WaitGroup
	do := func(v int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Do(context.Background(), "test", v); err != nil {
				t.Errorf("Do(%d): %v", v, err)
			}
		}()
	}
	do(0)
	waitAccepted(t, b, 1)
	for v := 1; v <= 4; v++ {
		do(v)
	}
	// 1 in the busy worker's batch, 3 in the next (full), the fifth
	// waiting for it to leave.
	waitAccepted(t, b, 4)
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 3 || sizes[0] != 1 || sizes[1] != 3 || sizes[2] != 1 {
		t.Errorf("batch sizes %v, want [1 3 1]", sizes)
	}
}

// waitAccepted waits until the batcher has taken n requests in.
func waitAccepted(t *testing.T, b *Batcher[int], n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.accepted.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the batcher took %d requests in, want %d", b.accepted.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

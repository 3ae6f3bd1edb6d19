package claimcheck_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
)

func TestRetryPolicyBackoff(t *testing.T) {
	p := claimcheck.RetryPolicy{Base: time.Second, MaxDelay: time.Minute}
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {10, time.Minute}, {200, time.Minute}} {
		if got := p.Backoff(c.n); got != c.want {
			t.Errorf("Backoff(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

func TestRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("publish: %w", claimcheck.ErrConfig), true},
		{fmt.Errorf("publish: %w", claimcheck.ErrPayloadTooLarge), true},
		{claimcheck.Permanent(errors.New("no")), true},
		{fmt.Errorf("publish: %w", claimcheck.ErrUnavailable), false},
		{errors.New("nacked"), false},
	} {
		if got := claimcheck.Refused(c.err); got != c.want {
			t.Errorf("Refused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Waits for unavailable infrastructure are capped at MaxWaitDelay (default
// 10 s), jitter included, however long the outage has lasted, so a job
// resumes within seconds of the store's return; a transient failure keeps
// the full backoff. The clock is the caller's (now), not the wall clock.
func TestRetryPolicyMaxWaitDelay(t *testing.T) {
	p := claimcheck.RetryPolicy{}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	down := fmt.Errorf("s3 cut: %w", claimcheck.ErrUnavailable)
	for _, out := range []time.Duration{0, 45 * time.Second, 3 * time.Minute, 10 * time.Minute, time.Hour} {
		d := p.Decide(down, 1, 5, start, start.Add(out))
		if d.Dead || d.SpendsAttempt || d.Delay <= 0 || d.Delay > claimcheck.DefaultMaxWaitDelay {
			t.Errorf("unavailable for %v: %+v; want a wait of at most %v, no attempt spent", out, d, claimcheck.DefaultMaxWaitDelay)
		}
	}
	if d := p.Decide(errors.New("handler failed"), 4, 5, time.Time{}, start); d.Delay < 8*time.Second {
		t.Errorf("transient failure of attempt 4: delay %v, want the full backoff (at least 8 s)", d.Delay)
	}
	capped := claimcheck.RetryPolicy{MaxWaitDelay: 2 * time.Second}
	for n := 1; n < 20; n++ {
		if got := capped.WaitDelay(n); got > 2*time.Second {
			t.Errorf("WaitDelay(%d) = %v with MaxWaitDelay 2s", n, got)
		}
	}
	if got := (claimcheck.RetryPolicy{MaxDelay: time.Second}).WithDefaults().MaxWaitDelay; got != time.Second {
		t.Errorf("MaxWaitDelay with MaxDelay 1s = %v, want 1s (never above MaxDelay)", got)
	}
}

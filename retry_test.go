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

package claimcheck

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Failure is the class of a failed attempt, as every claimcheck worker (the
// job pipeline's River queue and a broker consumer alike) sees it. Classify
// is the one place that decides it; RetryPolicy.Decide what follows.
type Failure int

const (
	// FailureTransient is a failure of the work itself that may pass: a
	// handler's error, a job timeout. It spends one of the job's attempts.
	FailureTransient Failure = iota
	// FailurePermanent cannot be fixed by retrying (IsPermanent): the job
	// is dead on this attempt.
	FailurePermanent
	// FailureUnavailable is infrastructure that cannot be reached or
	// answers with an outage: the store, the job database, the keeper or the
	// broker (ErrUnavailable, ErrKeeper, ErrAccessDenied). It spends no
	// attempt: the job waits, with capped backoff, for as long as the
	// policy's Window.
	FailureUnavailable
)

func (f Failure) String() string {
	switch f {
	case FailurePermanent:
		return "permanent"
	case FailureUnavailable:
		return "unavailable"
	}
	return "transient"
}

// Classify returns err's Failure: permanent for the classes IsPermanent
// lists, unavailable for ErrUnavailable, ErrKeeper and ErrAccessDenied
// (an operator can fix each while the job waits), transient for anything
// else (a handler's own errors).
func Classify(err error) Failure {
	switch {
	case IsPermanent(err):
		return FailurePermanent
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrKeeper), errors.Is(err, ErrAccessDenied):
		return FailureUnavailable
	}
	return FailureTransient
}

// Refused reports whether err says that what was sent is refused for good
// where it was sent: a permanent failure (Classify; a broker's message too
// large for it is one), or ErrConfig, the receiving end's configuration
// not accepting it (a broker transport refusing, before sending anything,
// a message it cannot carry). The outbox relay dead-letters such an entry
// rather than publish it again. A worker's job keeps RetryPolicy's verdict
// instead, which retries ErrConfig as transient.
func Refused(err error) bool {
	return Classify(err) == FailurePermanent || errors.Is(err, ErrConfig)
}

// Retry defaults (see RetryPolicy).
const (
	DefaultMaxAttempts   = 5
	DefaultRetryBase     = time.Second
	DefaultMaxRetryDelay = 5 * time.Minute
	// DefaultMaxWaitDelay caps each wait for unavailable infrastructure
	// (RetryPolicy.MaxWaitDelay).
	DefaultMaxWaitDelay = 10 * time.Second
)

// RetryWindow is the longest time from a job's first attempt to its last
// when each of maxAttempts attempts may run for jobTimeout, a crashed
// worker's job waits up to lease before it is rescued, and each retry waits
// at most the longest backoff (DefaultMaxRetryDelay plus its 20% jitter).
// It is both the outage budget of RetryPolicy (infrastructure unavailability
// is retried for this long) and the retry window that object retention must
// cover (RetentionInputs.RetryWindow): one definition for both.
func RetryWindow(maxAttempts int, jobTimeout, lease time.Duration) time.Duration {
	return time.Duration(maxAttempts) * (jobTimeout + lease + DefaultMaxRetryDelay*6/5)
}

// RetryPolicy is the one retry policy of claimcheck's workers, for jobs
// from the job database and from a broker alike:
//   - a permanent failure is dead on its attempt;
//   - a transient failure is retried after Base·2^(attempt-1), capped at
//     MaxDelay, with up to 20% jitter, until the job has had MaxAttempts
//     attempts (its own limit when it carries one);
//   - unavailable infrastructure is retried with the same backoff, capped
//     at MaxWaitDelay instead, without spending an attempt, until it has
//     lasted Window since the first unavailable attempt; then the job is
//     dead with the outage's reason (store-unavailable, keeper-failed,
//     access-denied). The low cap is what makes waiting jobs resume within
//     seconds of the store's, keeper's or database's return rather than at
//     the end of a backoff of minutes (the backoff spares a failing job's
//     own work; an outage costs one cheap try per job and wait).
//
// The zero value is DefaultRetryPolicy's values.
type RetryPolicy struct {
	// MaxAttempts of a job failing transiently. Default DefaultMaxAttempts.
	MaxAttempts int
	// Base is the first retry's delay. Default DefaultRetryBase.
	Base time.Duration
	// MaxDelay caps each delay. Default DefaultMaxRetryDelay.
	MaxDelay time.Duration
	// Window is how long unavailability is retried. Default
	// RetryWindow(MaxAttempts, 30 min, 2 min), 3h10m for 5 attempts.
	Window time.Duration
	// MaxWaitDelay caps each wait for unavailable infrastructure (a
	// FailureUnavailable attempt, and a finished handler's check-in and
	// completion retried in place), jitter included: the longest a job
	// waits after its store, keeper or database is back. Default
	// DefaultMaxWaitDelay; at most MaxDelay.
	MaxWaitDelay time.Duration
}

// WithDefaults returns p with its zero fields set to the defaults.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.Base <= 0 {
		p.Base = DefaultRetryBase
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxRetryDelay
	}
	if p.Window <= 0 {
		p.Window = RetryWindow(p.MaxAttempts, 30*time.Minute, 2*time.Minute)
	}
	if p.MaxWaitDelay <= 0 {
		p.MaxWaitDelay = DefaultMaxWaitDelay
	}
	p.MaxWaitDelay = min(p.MaxWaitDelay, p.MaxDelay)
	return p
}

// WaitDelay is the pause after the n-th failure in a row (n from 1) that
// is a wait for unavailable infrastructure: Delay(n), jitter included,
// capped at MaxWaitDelay.
func (p RetryPolicy) WaitDelay(n int) time.Duration {
	p = p.WithDefaults()
	return min(p.Delay(n), p.MaxWaitDelay)
}

// Backoff is the delay after the n-th failure in a row (n from 1):
// Base·2^(n-1) capped at MaxDelay, without jitter.
func (p RetryPolicy) Backoff(n int) time.Duration {
	p = p.WithDefaults()
	d := p.Base
	for i := 1; i < n; i++ {
		d *= 2
		if d >= p.MaxDelay || d <= 0 {
			return p.MaxDelay
		}
	}
	return min(d, p.MaxDelay)
}

// Delay is Backoff(n) plus up to 20% jitter, so that the retries of a burst
// spread out.
func (p RetryPolicy) Delay(n int) time.Duration {
	d := p.Backoff(n)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// Decision is what RetryPolicy.Decide makes of a failed attempt.
type Decision struct {
	// Failure is the attempt's class (Classify).
	Failure Failure
	// Dead: the job goes to the dead letters now.
	Dead bool
	// Delay before the next attempt, when not Dead.
	Delay time.Duration
	// SpendsAttempt is false for unavailability: the attempt is given back.
	SpendsAttempt bool
}

// Decide classifies err, the failure of attempt (from 1) of a job allowed
// maxAttempts (0: the policy's MaxAttempts), and says what follows.
// unavailableSince is when the job's current run of unavailable attempts
// began (zero if this is the first), now the current time.
func (p RetryPolicy) Decide(err error, attempt, maxAttempts int, unavailableSince, now time.Time) Decision {
	p = p.WithDefaults()
	if maxAttempts <= 0 {
		maxAttempts = p.MaxAttempts
	}
	d := Decision{Failure: Classify(err), SpendsAttempt: true}
	switch d.Failure {
	case FailurePermanent:
		d.Dead = true
	case FailureUnavailable:
		d.SpendsAttempt = false
		if unavailableSince.IsZero() {
			unavailableSince = now
		}
		out := now.Sub(unavailableSince)
		if out >= p.Window {
			d.Dead = true
			return d
		}
		// The n-th unavailable retry in a row, estimated from how long the
		// outage has lasted; never past the end of the window.
		n := 1
		for t := time.Duration(0); t < out && n < 64; n++ {
			t += p.Backoff(n)
		}
		d.Delay = min(p.WaitDelay(n), p.Window-out)
	default:
		if attempt >= maxAttempts {
			d.Dead = true
			return d
		}
		d.Delay = p.Delay(attempt)
	}
	return d
}

// Package ops checks a live claimcheck deployment: Doctor reads its
// configuration and probes what each setting relies on (the store writable
// and readable, the keeper, the bucket's actual lifecycle expiry against the
// retention the pipeline needs, the dead-letter retention, the inline
// threshold against the transport's message size), and Verify runs the seed
// article's four end-to-end checks against it (uniform tickets, a deleted
// payload dead-letters on attempt 1, the oldest dead letter's payload is
// still readable, an orphan is collected by the sweeper).
//
// Both write only under reserved tenants (DoctorTenant, VerifyTenant) and
// one reserved kind (VerifyKind), remove what they wrote, and return a
// Report: one Check per line of a pass/fail table. Neither returns an error
// for a failed check; a Report with any StatusFail is a failed run.
package ops

import (
	"crypto/rand"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Status is the outcome of one check.
type Status string

// Statuses. Only StatusFail fails a Report.
const (
	StatusPass Status = "pass"
	// StatusWarn is a setting that is safe but probably not what is wanted
	// (no lifecycle expiry at all, no encryption).
	StatusWarn Status = "warn"
	StatusFail Status = "fail"
	// StatusSkip is a check that could not run because an earlier one
	// failed; its Detail says which.
	StatusSkip Status = "skip"
)

// Check is one line of a report.
type Check struct {
	// Name identifies the check ("store", "expiry payloads/", ...).
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail says what was checked and found, in a sentence or two, for
	// people. It never holds payload bytes, full object keys or secrets.
	Detail string `json:"detail"`
}

// Report is the outcome of a Doctor or Verify run.
type Report struct {
	// OK is false when any check failed.
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
	// Elapsed is the run's duration.
	Elapsed time.Duration `json:"elapsed_ns"`
}

func (r *Report) add(name string, st Status, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, Status: st, Detail: fmt.Sprintf(format, args...)})
}

func (r *Report) finish(start time.Time) *Report {
	r.OK = true
	for _, c := range r.Checks {
		if c.Status == StatusFail {
			r.OK = false
		}
	}
	r.Elapsed = time.Since(start)
	return r
}

// Failed returns the checks that failed.
func (r *Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Status == StatusFail {
			out = append(out, c)
		}
	}
	return out
}

// Check returns the check named name, or nil.
func (r *Report) Check(name string) *Check {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// argsOverhead is the pipeline's bound on what a job's arguments add around
// its ticket, the figure pipeline.Open checks the inline threshold against.
const argsOverhead = pipeline.ArgsOverhead

// CheckInlineThreshold checks that an inline ticket for a payload of
// threshold bytes (negative: nothing travels inline), wrapped in a job's
// arguments, fits the transport's maximum message size (0:
// pipeline.DefaultMaxMessageSize). It needs nothing opened, so a
// configuration that pipeline.Open refuses can still be reported.
func CheckInlineThreshold(threshold, maxMessageSize int64) Check {
	if maxMessageSize <= 0 {
		maxMessageSize = pipeline.DefaultMaxMessageSize
	}
	c := Check{Name: CheckInline, Status: StatusPass}
	if threshold < 0 {
		c.Detail = fmt.Sprintf("nothing travels inline: every ticket is at most %d bytes, within the %s maximum message size", claimcheck.MaxTicketBytes, bytesText(maxMessageSize))
		return c
	}
	need := claimcheck.InlineTicketSize(threshold) + argsOverhead
	if need > maxMessageSize {
		c.Status = StatusFail
		c.Detail = fmt.Sprintf("an inline payload of %s makes job arguments of up to %d bytes, above the transport's maximum message size of %s (%d bytes): lower --inline-threshold to %s or less",
			bytesText(threshold), need, bytesText(maxMessageSize), maxMessageSize, bytesText(MaxInlineThresholdFor(maxMessageSize)))
		return c
	}
	c.Detail = fmt.Sprintf("inline payloads of up to %s make job arguments of up to %d bytes, within the transport's maximum message size of %s",
		bytesText(threshold), need, bytesText(maxMessageSize))
	return c
}

// MaxInlineThresholdFor is the largest inline threshold, in bytes, whose
// job arguments fit maxMessageSize; 0 when none does.
func MaxInlineThresholdFor(maxMessageSize int64) int64 {
	lo, hi := int64(0), int64(claimcheck.MaxInlineThreshold)
	if claimcheck.InlineTicketSize(0)+argsOverhead > maxMessageSize {
		return 0
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if claimcheck.InlineTicketSize(mid)+argsOverhead <= maxMessageSize {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// Names of Doctor's and Verify's checks.
const (
	CheckStore       = "store"
	CheckCredentials = "credentials"
	CheckKeeper      = "keeper"
	// CheckDeploymentKey: this host's keeper unwraps the data keys of the
	// deployment's existing sealed objects, not only its own probe's.
	CheckDeploymentKey = "deployment key"
	CheckRetention     = "retention"
	CheckExpiry        = "expiry " // + prefix: "expiry payloads/", "expiry results/"
	// CheckAbortIncomplete + prefix: a rule aborts incomplete multipart
	// uploads there (what a check-in killed mid-upload leaves).
	CheckAbortIncomplete = "abort incomplete uploads "
	CheckDeadLetter      = "dead-letter retention"
	CheckInline          = "inline threshold"

	CheckUniform     = "uniform tickets"
	CheckMissingDead = "missing payload dead-letters"
	CheckOldestDead  = "oldest dead letter readable"
	CheckOrphan      = "orphan swept"
	CheckCleanup     = "cleanup"
)

// probeReader is n bytes that no other payload has: a random seed
// expanded by ChaCha8, so a probe never lands on an existing object's
// content address and costs no memory whatever its size.
func probeReader(n int64) io.Reader {
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	return io.LimitReader(mrand.NewChaCha8(seed), n)
}

// bytesText writes a byte count for people: "64 KiB", "16 MiB", exact
// bytes below 1 MiB otherwise ("65537 B"), and "43.1 MiB" above.
func bytesText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// span writes a range "a–b", or just "a" when both ends are equal.
func span(a, b string) string {
	if a == b {
		return a
	}
	return a + "–" + b
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// errText is an error's message without the module's "claimcheck: "
// prefix (the CLI prints its own).
func errText(err error) string {
	return strings.TrimPrefix(err.Error(), "claimcheck: ")
}

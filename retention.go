package claimcheck

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// day is the unit of lifecycle expiry (S3 Expiration.Days, GCS age).
const day = 24 * time.Hour

// RetentionInputs are the delays an object must outlive. Each is a length
// of time, zero or more; ParseDuration reads them with d (day) and w (week)
// units.
type RetentionInputs struct {
	// Backlog is the longest time a job may wait in its queue before a
	// worker first takes it.
	Backlog time.Duration `json:"backlog_ns"`
	// RetryWindow is the longest time from a job's first attempt to its last
	// (the whole retry curve: the pipeline's backoff doubles from 1 s up to
	// 5 min per attempt, plus the job timeout of each attempt).
	RetryWindow time.Duration `json:"retry_window_ns"`
	// DeadLetter is how long a dead letter is kept, and can be replayed,
	// before the job engine prunes it: the pipeline's
	// Config.DeadLetterRetention (pipeline.DefaultDeadLetterRetention, 14
	// days, unless set; River then prunes cancelled and discarded jobs).
	// Zero is taken literally (no dead letters kept).
	DeadLetter time.Duration `json:"dead_letter_ns"`
	// ReplayMargin is the slack for a human to notice a dead letter, fix the
	// cause and replay it (the common recipe's "week of slack" (docs/invariants.md)).
	ReplayMargin time.Duration `json:"replay_margin_ns"`
	// ResultsExtra is added for results: how long after the last possible
	// processing a consumer may still fetch a job's result. Results keep at
	// least the payloads' retention plus this (see Retention.ResultDays).
	ResultsExtra time.Duration `json:"results_extra_ns"`
}

// RetentionStep is one term of the sum, with the running total after it.
type RetentionStep struct {
	Name  string        `json:"name"`
	Add   time.Duration `json:"add_ns"`
	Total time.Duration `json:"total_ns"`
}

// Retention is the minimum object lifetime and how it was reached.
type Retention struct {
	Inputs RetentionInputs `json:"inputs"`
	// PayloadSteps add up to PayloadTotal: backlog, retry window,
	// dead-letter retention, replay margin.
	PayloadSteps []RetentionStep `json:"payload_steps"`
	// PayloadTotal is the exact sum.
	PayloadTotal time.Duration `json:"payload_total_ns"`
	// PayloadDays is PayloadTotal rounded up to whole days, at least 1: the
	// shortest lifecycle expiry allowed for the payloads/ prefix.
	PayloadDays int `json:"payload_days"`
	// TruncatedDays is PayloadTotal rounded down, the common recipe's
	// mistake; it equals PayloadDays only for an exact number of days.
	TruncatedDays int `json:"truncated_days"`
	// ResultTotal is PayloadTotal plus ResultsExtra: a result can be written
	// as late as the last replay, and lifecycle age counts from an object's
	// first write, which for a content-addressed result that another job
	// produced before may be long before this job.
	ResultTotal time.Duration `json:"result_total_ns"`
	// ResultDays is ResultTotal rounded up to whole days, at least
	// PayloadDays: the shortest expiry allowed for the results/ prefix.
	ResultDays int `json:"result_days"`
}

// maxRetention bounds every input and sum: 100 years, far inside
// time.Duration's 292 and S3's int32 days.
const maxRetention = 100 * 365 * day

// ComputeRetention is the retention arithmetic of docs/invariants.md, invariant 5: an
// object must outlive every path from its check-in to the last moment anyone
// may still process it — the queue backlog, the retry window, the
// dead-letter retention and a margin for manual replay — so the bucket's
// lifecycle expiry must be at least their sum, rounded UP to whole days.
// Results get the same plus ResultsExtra.
//
// The common recipe (docs/invariants.md) computes
//
//	hours = max_backlog_h + retry_window_h + dlq_retention_d * 24
//	return int(hours / 24) + 7        # a week of slack for manual replay
//
// which truncates: 4h + 1h + 14d + 7d is 21d5h, and int() answers 21 days,
// so a replay in the last five hours finds its payload expired.
// ComputeRetention rounds up (22 days) and reports what truncation would
// have given (TruncatedDays).
//
// Errors: ErrConfig for a negative input or a sum above 100 years.
func ComputeRetention(in RetentionInputs) (*Retention, error) {
	terms := []struct {
		name string
		d    time.Duration
	}{
		{"backlog", in.Backlog},
		{"retry window", in.RetryWindow},
		{"dead-letter retention", in.DeadLetter},
		{"replay margin", in.ReplayMargin},
		{"results extra", in.ResultsExtra},
	}
	r := &Retention{Inputs: in}
	var total time.Duration
	for i, t := range terms {
		if t.d < 0 {
			return nil, fmt.Errorf("claimcheck: retention: %s is negative (%s): %w", t.name, t.d, ErrConfig)
		}
		if t.d > maxRetention || total+t.d > maxRetention {
			return nil, fmt.Errorf("claimcheck: retention: the sum exceeds %s: %w", FormatDuration(maxRetention), ErrConfig)
		}
		total += t.d
		if i < 4 {
			r.PayloadSteps = append(r.PayloadSteps, RetentionStep{Name: t.name, Add: t.d, Total: total})
		}
	}
	r.PayloadTotal = total - in.ResultsExtra
	r.PayloadDays = max(1, DaysRoundedUp(r.PayloadTotal))
	r.TruncatedDays = int(r.PayloadTotal / day)
	r.ResultTotal = total
	r.ResultDays = max(r.PayloadDays, DaysRoundedUp(r.ResultTotal))
	return r, nil
}

// DaysRoundedUp is d in whole days, rounded up: 24h is 1 day, 24h plus one
// nanosecond is 2. Negative durations give 0.
func DaysRoundedUp(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	days := d / day
	if d%day != 0 {
		days++
	}
	return int(days)
}

// Explain is the sum step by step, one line per term, for people:
//
//	  backlog                    4h  total 4h
//	+ retry window               1h  total 5h
//	+ dead-letter retention     14d  total 14d5h
//	+ replay margin              7d  total 21d5h
//	= 21d5h, rounded up to whole days: payloads/ need 22 days
func (r *Retention) Explain() string {
	var b strings.Builder
	for i, s := range r.PayloadSteps {
		op := "+"
		if i == 0 {
			op = " "
		}
		fmt.Fprintf(&b, "%s %-22s %8s  total %s\n", op, s.Name, FormatDuration(s.Add), FormatDuration(s.Total))
	}
	switch {
	case r.PayloadTotal == 0:
		fmt.Fprintf(&b, "= 0s: payloads/ need the shortest expiry there is, 1 day\n")
	case r.PayloadTotal%day == 0:
		fmt.Fprintf(&b, "= %s, a whole number of days: payloads/ need %s\n", FormatDuration(r.PayloadTotal), plural(r.PayloadDays, "day"))
	default:
		fmt.Fprintf(&b, "= %s, rounded up to whole days: payloads/ need %s\n", FormatDuration(r.PayloadTotal), plural(r.PayloadDays, "day"))
	}
	if r.TruncatedDays < r.PayloadDays && r.PayloadTotal > day {
		short := r.PayloadTotal - time.Duration(r.TruncatedDays)*day
		fmt.Fprintf(&b, "  (rounding down, as the common int(hours / 24) recipe does, gives %s: the last %s of replays would find their payload expired)\n",
			plural(r.TruncatedDays, "day"), FormatDuration(short))
	}
	fmt.Fprintf(&b, "+ %-22s %8s  total %s\n", "results extra", FormatDuration(r.Inputs.ResultsExtra), FormatDuration(r.ResultTotal))
	fmt.Fprintf(&b, "= results/ need %s\n", plural(r.ResultDays, "day"))
	return b.String()
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// FormatDuration writes d with a day unit where it has whole days ("21d5h",
// "14d", "4h", "1h30m", "0s"), in a form ParseDuration reads back.
func FormatDuration(d time.Duration) string {
	if d < 0 {
		return "-" + FormatDuration(-d)
	}
	days, rest := d/day, d%day
	var s string
	if days > 0 {
		s = strconv.FormatInt(int64(days), 10) + "d"
		if rest == 0 {
			return s
		}
	}
	r := rest.String()
	if strings.HasSuffix(r, "m0s") {
		r = r[:len(r)-2]
	}
	if strings.HasSuffix(r, "h0m") {
		r = r[:len(r)-2]
	}
	return s + r
}

// durationUnits are the units ParseDuration accepts.
var durationUnits = map[string]time.Duration{
	"ns": time.Nanosecond,
	"us": time.Microsecond,
	"µs": time.Microsecond, // U+00B5
	"μs": time.Microsecond, // U+03BC
	"ms": time.Millisecond,
	"s":  time.Second,
	"m":  time.Minute,
	"h":  time.Hour,
	"d":  day,
	"w":  7 * day,
}

const durationHelp = "use numbers with units ns, us, ms, s, m, h, d (days), w (weeks), e.g. 14d, 4h30m, 1w2d, 1.5h, or 0"

// ParseDuration reads a length of time: a Go duration (4h, 1h30m, 90s)
// whose units may also include d (24 hours) and w (7 days), so "14d",
// "2w", "1w3d12h" and "1.5d" all work. It returns a plain error, saying
// what is wrong, for an empty string, a negative duration, a number
// without a unit, an unknown unit or a duration above 100 years.
func ParseDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, errors.New("empty duration: " + durationHelp)
	}
	if strings.HasPrefix(in, "-") {
		return 0, fmt.Errorf("duration %q is negative: a length of time must be 0 or more", s)
	}
	in = strings.TrimPrefix(in, "+")
	if in == "0" {
		return 0, nil
	}
	var exact time.Duration // whole numbers of each unit, exact
	var total float64       // fractions ("1.5d"), rounded to the nanosecond at the end
	for rest := in; rest != ""; {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		num := rest[:i]
		if num == "" || num == "." || strings.Count(num, ".") > 1 {
			return 0, fmt.Errorf("invalid duration %q: expected a number at %q; %s", s, rest, durationHelp)
		}
		rest = rest[i:]
		j := 0
		for j < len(rest) && !(rest[j] >= '0' && rest[j] <= '9' || rest[j] == '.') {
			j++
		}
		unitName := rest[:j]
		rest = rest[j:]
		if unitName == "" {
			return 0, fmt.Errorf("invalid duration %q: %s has no unit; %s", s, num, durationHelp)
		}
		unit, ok := durationUnits[unitName]
		if !ok {
			return 0, fmt.Errorf("invalid duration %q: unknown unit %q; %s", s, unitName, durationHelp)
		}
		whole, frac, _ := strings.Cut(num, ".")
		if whole != "" {
			n, err := strconv.ParseInt(whole, 10, 64)
			if err != nil || n > int64(maxRetention/unit) {
				return 0, fmt.Errorf("duration %q is too long: at most %s", s, FormatDuration(maxRetention))
			}
			exact += time.Duration(n) * unit
			if exact > maxRetention {
				return 0, fmt.Errorf("duration %q is too long: at most %s", s, FormatDuration(maxRetention))
			}
		}
		if frac != "" {
			if len(frac) > 18 {
				frac = frac[:18]
			}
			f, _ := strconv.ParseUint(frac, 10, 64)
			total += float64(f) / math.Pow10(len(frac)) * float64(unit)
		}
	}
	d := exact + time.Duration(math.Round(total))
	if d > maxRetention {
		return 0, fmt.Errorf("duration %q is too long: at most %s", s, FormatDuration(maxRetention))
	}
	return d, nil
}

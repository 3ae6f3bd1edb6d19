package claimcheck_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

const day = 24 * time.Hour

// The example: 4h + 1h + 14d + 7d is 21d5h, so 22 days, where the
// common recipe int(hours/24) + 7 (docs/invariants.md) answers 21.
func TestRetentionSeedExampleRoundsUp(t *testing.T) {
	t.Parallel()
	r, err := claimcheck.ComputeRetention(claimcheck.RetentionInputs{
		Backlog: 4 * time.Hour, RetryWindow: time.Hour, DeadLetter: 14 * day, ReplayMargin: 7 * day,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.PayloadTotal != 21*day+5*time.Hour {
		t.Errorf("PayloadTotal = %s, want 21d5h", claimcheck.FormatDuration(r.PayloadTotal))
	}
	if r.PayloadDays != 22 {
		t.Errorf("PayloadDays = %d, want 22 (rounded up)", r.PayloadDays)
	}
	if r.TruncatedDays != 21 {
		t.Errorf("TruncatedDays = %d, want 21 (the common recipe's answer)", r.TruncatedDays)
	}
	if r.ResultDays != 22 {
		t.Errorf("ResultDays = %d with no results extra, want the payloads' 22", r.ResultDays)
	}
	wantSteps := []struct {
		name  string
		total time.Duration
	}{{"backlog", 4 * time.Hour}, {"retry window", 5 * time.Hour}, {"dead-letter retention", 14*day + 5*time.Hour}, {"replay margin", 21*day + 5*time.Hour}}
	if len(r.PayloadSteps) != len(wantSteps) {
		t.Fatalf("%d steps, want %d", len(r.PayloadSteps), len(wantSteps))
	}
	for i, w := range wantSteps {
		if s := r.PayloadSteps[i]; s.Name != w.name || s.Total != w.total {
			t.Errorf("step %d = %s total %s, want %s total %s", i, s.Name, s.Total, w.name, w.total)
		}
	}
	ex := r.Explain()
	for _, want := range []string{"payloads/ need 22 days", "21d5h", "gives 21 days", "the last 5h of replays", "results/ need 22 days"} {
		if !strings.Contains(ex, want) {
			t.Errorf("Explain() lacks %q:\n%s", want, ex)
		}
	}
	t.Logf("\n%s", ex)
}

func TestRetentionRounding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		total time.Duration
		days  int
	}{
		{"exact one day", day, 1},
		{"one day and 1ns", day + time.Nanosecond, 2},
		{"exact 21 days", 21 * day, 21},
		{"21 days and 1ns", 21*day + time.Nanosecond, 22},
		{"one ns short of 22 days", 22*day - time.Nanosecond, 22},
		{"one hour", time.Hour, 1},
		{"zero: the shortest expiry is 1 day", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := claimcheck.ComputeRetention(claimcheck.RetentionInputs{DeadLetter: tc.total})
			if err != nil {
				t.Fatal(err)
			}
			if r.PayloadDays != tc.days {
				t.Errorf("PayloadDays(%s) = %d, want %d", tc.total, r.PayloadDays, tc.days)
			}
		})
	}
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 0}, {-time.Hour, 0}, {time.Nanosecond, 1}, {day, 1}, {day + time.Nanosecond, 2}, {48 * time.Hour, 2}} {
		if got := claimcheck.DaysRoundedUp(tc.d); got != tc.want {
			t.Errorf("DaysRoundedUp(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestRetentionResultsLiveLonger(t *testing.T) {
	t.Parallel()
	r, err := claimcheck.ComputeRetention(claimcheck.RetentionInputs{
		Backlog: 4 * time.Hour, RetryWindow: time.Hour, DeadLetter: 14 * day, ReplayMargin: 7 * day, ResultsExtra: 30 * day,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.PayloadDays != 22 || r.ResultDays != 52 || r.ResultTotal != 51*day+5*time.Hour {
		t.Errorf("payload %d days, results %d days (%s); want 22 and 52 (51d5h)", r.PayloadDays, r.ResultDays, claimcheck.FormatDuration(r.ResultTotal))
	}
	if !strings.Contains(r.Explain(), "results/ need 52 days") {
		t.Errorf("Explain() lacks the results line:\n%s", r.Explain())
	}
}

func TestRetentionRefusesBadInputs(t *testing.T) {
	t.Parallel()
	for _, in := range []claimcheck.RetentionInputs{
		{Backlog: -time.Hour},
		{ResultsExtra: -1},
		{DeadLetter: 200 * 365 * day},
		{Backlog: 60 * 365 * day, ReplayMargin: 60 * 365 * day},
	} {
		if _, err := claimcheck.ComputeRetention(in); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("ComputeRetention(%+v) = %v, want ErrConfig", in, err)
		}
	}
}

// The pipeline's dead-letter retention is the input the CLI defaults to; a
// day-exact value must not round up by itself.
func TestRetentionPipelineDeadLetterDefault(t *testing.T) {
	t.Parallel()
	r, err := claimcheck.ComputeRetention(claimcheck.RetentionInputs{DeadLetter: pipeline.DefaultDeadLetterRetention})
	if err != nil {
		t.Fatal(err)
	}
	if r.PayloadDays != 14 {
		t.Errorf("pipeline.DefaultDeadLetterRetention alone needs %d days, want 14", r.PayloadDays)
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"0s", 0},
		{"0d", 0},
		{"4h", 4 * time.Hour},
		{"1h30m", 90 * time.Minute},
		{"90s", 90 * time.Second},
		{"250ms", 250 * time.Millisecond},
		{"14d", 14 * day},
		{"2w", 14 * day},
		{"1w3d12h", 10*day + 12*time.Hour},
		{"1.5d", 36 * time.Hour},
		{".5h", 30 * time.Minute},
		{"0.25w", 42 * time.Hour},
		{"21d5h", 21*day + 5*time.Hour},
		{" 7d ", 7 * day},
		{"+3h", 3 * time.Hour},
		{"1us", time.Microsecond},
		{"1µs", time.Microsecond},
		{"36500d", 36500 * day},
	} {
		got, err := claimcheck.ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", "empty duration"},
		{"   ", "empty duration"},
		{"-1h", "negative"},
		{"-14d", "negative"},
		{"14", "has no unit"},
		{"00", "has no unit"},
		{"1d2", "has no unit"},
		{"14days", `unknown unit "days"`},
		{"3y", `unknown unit "y"`},
		{"1D", `unknown unit "D"`},
		{"d", "expected a number"},
		{"1.2.3h", "expected a number"},
		{"1h-5m", `unknown unit "h-"`},
		{"forever", "expected a number"},
		{"36501d", "too long"},
		{"99999999999999999999w", "too long"},
		{"53000w", "too long"},
	} {
		_, err := claimcheck.ParseDuration(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseDuration(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
		if err != nil && tc.in != "" && strings.TrimSpace(tc.in) != "" && !strings.Contains(err.Error(), "d (days)") && !strings.Contains(err.Error(), "negative") && !strings.Contains(err.Error(), "too long") {
			t.Errorf("ParseDuration(%q) error does not list the units: %v", tc.in, err)
		}
	}
}

func TestFormatDurationRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{4 * time.Hour, "4h"},
		{90 * time.Minute, "1h30m"},
		{14 * day, "14d"},
		{21*day + 5*time.Hour, "21d5h"},
		{day + 90*time.Second, "1d1m30s"},
		{day + time.Nanosecond, "1d1ns"},
		{-2 * day, "-2d"},
	} {
		if got := claimcheck.FormatDuration(tc.d); got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if tc.d < 0 {
			continue
		}
		if back, err := claimcheck.ParseDuration(tc.want); err != nil || back != tc.d {
			t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v", tc.d, back, err)
		}
	}
}

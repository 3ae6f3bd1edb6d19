package cli

// The retention inputs shared by retention, lifecycle and doctor.

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// retentionFlags are the inputs of the retention sum, shared by retention
// and lifecycle.
type retentionFlags struct {
	backlog, retryWindow, deadLetter, replayMargin, resultsExtra string
}

// The defaults of the retention flags, also what submit and work check the
// bucket's lifecycle against at start-up (startupChecks).
const (
	defaultBacklog      = "1d"
	defaultReplayMargin = "7d"
	defaultResultsExtra = "0"
)

// defaultRetention is what `claimcheck retention` prints with its
// defaults and g's --max-attempts.
func defaultRetention(g *globals) (*claimcheck.Retention, error) {
	f := retentionFlags{backlog: defaultBacklog, deadLetter: claimcheck.FormatDuration(pipeline.DefaultDeadLetterRetention),
		replayMargin: defaultReplayMargin, resultsExtra: defaultResultsExtra}
	return f.compute(g.maxAttempts)
}

func (f *retentionFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.backlog, "backlog", defaultBacklog, "longest time a job may wait in its queue before its first attempt (units: s, m, h, d, w)")
	fs.StringVar(&f.retryWindow, "retry-window", "",
		"longest time from a job's first attempt to its last, also how long workers retry an unavailable store, database, keeper or broker (default: --max-attempts × (30m job timeout + 2m lease + 6m backoff), 3h10m for 5 attempts)")
	fs.StringVar(&f.deadLetter, "dead-letter", claimcheck.FormatDuration(pipeline.DefaultDeadLetterRetention),
		"how long dead letters are kept, replayable, before River prunes them (the pipeline's dead-letter retention)")
	fs.StringVar(&f.replayMargin, "replay-margin", defaultReplayMargin, "slack to notice a dead letter, fix its cause and replay it")
	fs.StringVar(&f.resultsExtra, "results-extra", defaultResultsExtra, "added for results/: how long after the last processing a consumer may still fetch a result")
}

// compute parses the flags (usage errors name the flag) and adds them up.
// An unset --retry-window is the pipeline's for maxAttempts attempts.
func (f *retentionFlags) compute(maxAttempts int) (*claimcheck.Retention, error) {
	retryWindow := f.retryWindow
	if retryWindow == "" {
		retryWindow = claimcheck.FormatDuration(pipeline.DefaultRetryWindow(maxAttempts))
	}
	var in claimcheck.RetentionInputs
	for _, p := range []struct {
		flag string
		val  string
		dst  *time.Duration
	}{
		{"--backlog", f.backlog, &in.Backlog},
		{"--retry-window", retryWindow, &in.RetryWindow},
		{"--dead-letter", f.deadLetter, &in.DeadLetter},
		{"--replay-margin", f.replayMargin, &in.ReplayMargin},
		{"--results-extra", f.resultsExtra, &in.ResultsExtra},
	} {
		d, err := claimcheck.ParseDuration(p.val)
		if err != nil {
			return nil, usagef("%s: %v", p.flag, err)
		}
		*p.dst = d
	}
	r, err := claimcheck.ComputeRetention(in)
	if err != nil {
		return nil, usageError{err}
	}
	return r, nil
}

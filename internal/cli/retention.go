package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// retentionFlags are the inputs of the retention sum, shared by retention
// and lifecycle.
type retentionFlags struct {
	backlog, retryWindow, deadLetter, replayMargin, resultsExtra string
}

func (f *retentionFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.backlog, "backlog", "1d", "longest time a job may wait in its queue before its first attempt (units: s, m, h, d, w)")
	fs.StringVar(&f.retryWindow, "retry-window", "",
		"longest time from a job's first attempt to its last, also how long workers retry an unavailable store, database, keeper or broker (default: --max-attempts × (30m job timeout + 2m lease + 6m backoff), 3h10m for 5 attempts)")
	fs.StringVar(&f.deadLetter, "dead-letter", claimcheck.FormatDuration(pipeline.DefaultDeadLetterRetention),
		"how long dead letters are kept, replayable, before River prunes them (the pipeline's dead-letter retention)")
	fs.StringVar(&f.replayMargin, "replay-margin", "7d", "slack to notice a dead letter, fix its cause and replay it")
	fs.StringVar(&f.resultsExtra, "results-extra", "0", "added for results/: how long after the last processing a consumer may still fetch a result")
}

// compute parses the flags (usage errors name the flag) and adds them up.
func (f *retentionFlags) compute(g *globals) (*claimcheck.Retention, error) {
	if f.retryWindow == "" {
		f.retryWindow = claimcheck.FormatDuration(pipeline.DefaultRetryWindow(g.maxAttempts))
	}
	var in claimcheck.RetentionInputs
	for _, p := range []struct {
		flag string
		val  string
		dst  *time.Duration
	}{
		{"--backlog", f.backlog, &in.Backlog},
		{"--retry-window", f.retryWindow, &in.RetryWindow},
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

// retentionOut is what retention --json prints: the library's figures with
// every duration also written for people.
type retentionOut struct {
	PayloadDays   int                   `json:"payload_days"`
	ResultDays    int                   `json:"result_days"`
	PayloadTotal  string                `json:"payload_total"`
	ResultTotal   string                `json:"result_total"`
	TruncatedDays int                   `json:"truncated_days"`
	Steps         []stepOut             `json:"steps"`
	Inputs        inputsOut             `json:"inputs"`
	Retention     *claimcheck.Retention `json:"exact"`
}

type stepOut struct {
	Name  string `json:"name"`
	Add   string `json:"add"`
	Total string `json:"total"`
}

type inputsOut struct {
	Backlog      string `json:"backlog"`
	RetryWindow  string `json:"retry_window"`
	DeadLetter   string `json:"dead_letter"`
	ReplayMargin string `json:"replay_margin"`
	ResultsExtra string `json:"results_extra"`
}

func newRetentionOut(r *claimcheck.Retention) retentionOut {
	f := claimcheck.FormatDuration
	out := retentionOut{PayloadDays: r.PayloadDays, ResultDays: r.ResultDays, PayloadTotal: f(r.PayloadTotal), ResultTotal: f(r.ResultTotal),
		TruncatedDays: r.TruncatedDays, Retention: r,
		Inputs: inputsOut{f(r.Inputs.Backlog), f(r.Inputs.RetryWindow), f(r.Inputs.DeadLetter), f(r.Inputs.ReplayMargin), f(r.Inputs.ResultsExtra)}}
	for _, s := range r.PayloadSteps {
		out.Steps = append(out.Steps, stepOut{s.Name, f(s.Add), f(s.Total)})
	}
	out.Steps = append(out.Steps, stepOut{"results extra", f(r.Inputs.ResultsExtra), f(r.ResultTotal)})
	return out
}

func newRetention(g *globals) *cobra.Command {
	var in retentionFlags
	c := &cobra.Command{
		Use:   "retention [--backlog D] [--retry-window D] [--dead-letter D] [--replay-margin D] [--results-extra D]",
		Short: "Print the minimum object lifetime and how it is reached",
		Long: `Add up every delay between a payload's check-in and the last time anyone may
still need it — queue backlog, retry window, dead-letter retention, replay
margin — and round the sum UP to whole days: the shortest lifecycle expiry
the store may have (4h + 1h + 14d + 7d = 21d5h: 22 days, not 21). Results
get the same plus --results-extra. Durations take Go units plus d (days) and
w (weeks): 4h, 90m, 14d, 2w.

The dead-letter retention defaults to the pipeline's (14d), the retry window
to a bound computed from the pipeline's attempts, job timeout and backoff.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := in.compute(g)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), newRetentionOut(r))
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "minimum object lifetime: %s for %s, %s for %s\n\n", days(r.PayloadDays), claimcheck.PrefixPayloads, days(r.ResultDays), claimcheck.PrefixResults)
			fmt.Fprint(out, r.Explain())
			return nil
		},
	}
	in.register(c.Flags())
	return c
}

func days(n int) string {
	if n == 1 {
		return "1 day"
	}
	return fmt.Sprintf("%d days", n)
}

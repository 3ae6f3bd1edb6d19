package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
)

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

// retentionOptions are the options of retention.
type retentionOptions struct {
	g  *globals
	in retentionFlags
	r  *claimcheck.Retention // the sum, made by Validate
}

// Validate parses the durations and adds them up (an impossible sum is a
// usage error too).
func (o *retentionOptions) Validate() (err error) {
	o.r, err = o.in.compute(o.g.maxAttempts)
	return err
}

func newRetention(g *globals) *cobra.Command {
	o := &retentionOptions{g: g}
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
		RunE: runE(o, nil),
	}
	o.in.register(c.Flags())
	return c
}

func (o *retentionOptions) run(ctx context.Context, s streams) error {
	g, r := o.g, o.r
	if g.json {
		return printJSON(s.out, newRetentionOut(r))
	}
	out := s.out
	fmt.Fprintf(out, "minimum object lifetime: %s for %s, %s for %s\n\n", days(r.PayloadDays), claimcheck.PrefixPayloads, days(r.ResultDays), claimcheck.PrefixResults)
	fmt.Fprint(out, r.Explain())
	return nil
}

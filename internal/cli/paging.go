package cli

// --limit and --since of the listing commands (jobs, dead).

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// pagingFlags are --limit N and --since DURATION|TIME.
type pagingFlags struct {
	limit int
	since string
	// sinceAgo or sinceAt is --since parsed by validate: a duration before
	// now (e.g. 36h, 2d), or a time (RFC 3339, or a date in UTC).
	sinceAgo time.Duration
	sinceAt  time.Time
}

func (p *pagingFlags) add(c *cobra.Command, what string) {
	c.Flags().IntVar(&p.limit, "limit", 0, "list at most N "+what+" (oldest first; 0: all)")
	c.Flags().StringVar(&p.since, "since", "", "only "+what+" whose age (the AGE column) began at or after this: a duration before now (90m, 36h, 2d) or a time (2026-12-01T09:00:00Z, 2026-12-01)")
}

// validate checks --limit and parses --since.
func (p *pagingFlags) validate() error {
	if p.limit < 0 {
		return usagef("--limit %d: give a positive number, or 0 for all", p.limit)
	}
	p.sinceAgo, p.sinceAt = 0, time.Time{}
	if p.since == "" {
		return nil
	}
	if d, err := claimcheck.ParseDuration(p.since); err == nil && d > 0 {
		p.sinceAgo = d
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, p.since); err == nil {
			p.sinceAt = t
			return nil
		}
	}
	return usagef("--since %q: give a positive duration (90m, 36h, 2d) or a time (2026-12-01T09:00:00Z, 2026-12-01)", p.since)
}

// apply sets opts.Limit and opts.Since, a --since duration counted back
// from now.
func (p *pagingFlags) apply(opts pipeline.ListOptions, now time.Time) pipeline.ListOptions {
	opts.Limit = p.limit
	switch {
	case p.sinceAgo > 0:
		opts.Since = now.Add(-p.sinceAgo)
	case !p.sinceAt.IsZero():
		opts.Since = p.sinceAt
	}
	return opts
}

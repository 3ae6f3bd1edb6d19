package jobs

// What a job's detail page reads beyond JobInfo: every attempt's recorded
// error, the trace context the job was enqueued under, and whether its
// documents still exist (a store's existence check, no bytes read).

import (
	"context"
	"strings"
	"time"

	"github.com/claimcheck/claimcheck"
)

// Attempt is one failed attempt of a job as River recorded it.
type Attempt struct {
	// Attempt is the attempt's number, from 1.
	Attempt int `json:"attempt"`
	// At is when the attempt failed.
	At time.Time `json:"at"`
	// Reason is the failure's reason (claimcheck.Reason's words: what the
	// recorded error starts with), as List shows a dead letter's.
	Reason string `json:"reason"`
	// Error is the recorded error (never payload bytes nor a full key:
	// errors are redacted before they are recorded).
	Error string `json:"error"`
}

// History is what the job database recorded about a job's attempts and
// trace.
type History struct {
	// Attempts are the failed attempts, oldest first.
	Attempts []Attempt `json:"attempts"`
	// TraceParent is the W3C traceparent the job was enqueued under, from
	// its metadata ("" when it was enqueued outside a trace).
	TraceParent string `json:"traceparent,omitempty"`
}

// JobHistory is Pipeline.JobHistory (package pipeline documents it).
func (p *Jobs) JobHistory(ctx context.Context, id int64) (*History, error) {
	row, err := p.jobRow(ctx, id)
	if err != nil {
		return nil, err
	}
	h := &History{}
	for _, e := range row.Errors {
		reason, text := recordedError(e.Error)
		h.Attempts = append(h.Attempts, Attempt{Attempt: e.Attempt, At: e.At, Reason: reason, Error: text})
	}
	var md struct {
		TraceParent string `json:"traceparent"`
	}
	if len(row.Metadata) > 0 && Unmarshal(row.Metadata, &md) == nil {
		h.TraceParent = md.TraceParent
	}
	return h, nil
}

// recordedError is an error River recorded for an attempt, River's
// "JobCancelError: " taken off (so the reason reads ours), and its reason:
// what comes before the first ": " (our errors start with their reason,
// see reasonError), the whole text when there is none.
func recordedError(recorded string) (reason, text string) {
	text = strings.TrimPrefix(recorded, "JobCancelError: ")
	reason, _, _ = strings.Cut(text, ": ")
	return reason, text
}

// Exists is Pipeline.Exists (package pipeline documents it).
func (p *Jobs) Exists(ctx context.Context, t *claimcheck.Ticket) (bool, error) {
	if t.IsInline() {
		return true, nil
	}
	st, err := p.storeFor(t)
	if err != nil {
		return false, err
	}
	info, err := st.Stat(ctx, t)
	if err != nil {
		return false, err
	}
	return info.Exists, nil
}

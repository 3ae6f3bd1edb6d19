package console

// The jobs and dead-letter pages (filters, exact counts, paging) and a
// job's own page.

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// sinceOption is a time filter: jobs finished (or enqueued, while
// pending) in the last d.
type sinceOption struct {
	Value, Label string
	d            time.Duration
}

// sinces are the time filters the pages offer, by their query value.
var sinces = []sinceOption{{"15m", "last 15 minutes", 15 * time.Minute}, {"1h", "last hour", time.Hour}, {"24h", "last day", 24 * time.Hour}, {"7d", "last 7 days", 7 * 24 * time.Hour}}

// listStates are the states the jobs page filters by.
var listStates = []string{"available", "running", "retryable", "scheduled", "completed", "dead", "cancelled", "discarded", "sent", "retrying"}

var reasonRegexp = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)

// filter is a listing's filters as the query gives them.
type filter struct {
	State, Kind, Tenant, Reason, Since string
	// Oldest lists oldest first (order=oldest); newest first otherwise.
	Oldest bool
}

// parseFilter reads a listing's filters from q; dead fixes the state. It
// returns the list options, or a message saying which filter is wrong
// (it never echoes the value).
func (c *Console) parseFilter(q url.Values, dead bool) (filter, pipeline.ListOptions, string) {
	f := filter{State: q.Get("state"), Kind: q.Get("kind"), Tenant: q.Get("tenant"), Reason: q.Get("reason"), Since: q.Get("since"), Oldest: q.Get("order") == "oldest"}
	if dead {
		f.State = pipeline.StateDead
	}
	opts := pipeline.ListOptions{State: f.State, Kind: f.Kind, Newest: !f.Oldest}
	switch {
	case f.State != "" && (!stateRegexp.MatchString(f.State) || pipeline.ValidateState(f.State) != nil):
		return f, opts, "unknown state: use one of the list"
	case f.Kind != "" && pipeline.ValidateKind(f.Kind) != nil:
		return f, opts, "not a kind: use a-z, 0-9, single '-' or '_' between them"
	case f.Tenant != "" && claimcheck.ValidateTenant(f.Tenant) != nil:
		return f, opts, "not a tenant name"
	case f.Reason != "" && !reasonRegexp.MatchString(f.Reason):
		return f, opts, "not a reason: a reason is a word such as handler-permanent"
	}
	if f.Tenant != "" {
		opts.Tenants = []string{f.Tenant}
	}
	if f.Since != "" {
		i := slices.IndexFunc(sinces, func(s sinceOption) bool { return s.Value == f.Since })
		if i < 0 {
			return f, opts, "unknown time filter: use one of the list"
		}
		opts.Since = c.o.Now().Add(-sinces[i].d)
	}
	return f, opts, ""
}

// query is f as a page's query, with after or before (a job id) if set.
func (f filter) query(dead bool, key string, id int64) string {
	v := url.Values{}
	for k, s := range map[string]string{"kind": f.Kind, "tenant": f.Tenant, "reason": f.Reason, "since": f.Since} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.State != "" && !dead {
		v.Set("state", f.State)
	}
	if f.Oldest {
		v.Set("order", "oldest")
	}
	if key != "" {
		v.Set(key, strconv.FormatInt(id, 10))
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// listing is what the jobs and dead-letter pages show.
type listing struct {
	Rows []jobRow
	// Total is the exact number of jobs the filters match, on every page.
	Total int64
	F     filter
	// Prev and Next are the links to the neighbouring pages ("" for
	// none).
	Prev, Next string
	PageSize   int
	States     []string
	Sinces     []sinceOption
	// Kinds and Reasons are the ones the job database holds, for the
	// filters' choices.
	Kinds, Reasons []string
	Retention      time.Duration
}

// listPage lists one page of the jobs opts (and reason) select, after or
// before the job id the query names, and counts them all.
func (c *Console) listPage(ctx context.Context, q url.Values, f filter, opts pipeline.ListOptions, dead bool) (*listing, error) {
	keep := func(j *pipeline.JobInfo) bool { return f.Reason == "" || j.Reason == f.Reason }
	n := c.o.RowLimit
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	page := opts
	backwards := before > 0 && after <= 0
	if backwards { // the page before: list the other way from it, then turn
		page.Newest, page.AfterID = !opts.Newest, before
	} else if after > 0 {
		page.AfterID = after
	}
	var jobs []*pipeline.JobInfo
	err := c.o.Pipeline.List(ctx, page, func(j *pipeline.JobInfo) error {
		if !keep(j) {
			return nil
		}
		if len(jobs) == n {
			return errEnough
		}
		jobs = append(jobs, j)
		return nil
	})
	more := errors.Is(err, errEnough)
	if err != nil && !more {
		return nil, err
	}
	if backwards {
		slices.Reverse(jobs)
	}
	l := &listing{F: f, PageSize: n, States: listStates, Sinces: sinces}
	for _, j := range jobs {
		l.Rows = append(l.Rows, c.row(j))
	}
	if len(jobs) > 0 {
		first, last := jobs[0].ID, jobs[len(jobs)-1].ID
		if (backwards && more) || (!backwards && after > 0) {
			l.Prev = f.query(dead, "before", first)
		}
		if backwards || more {
			l.Next = f.query(dead, "after", last)
		}
	}
	if f.Reason == "" {
		count := opts
		count.Newest = false
		l.Total, err = c.o.Pipeline.Count(ctx, count)
	} else { // a reason is read from each dead letter's error: count by listing
		err = c.o.Pipeline.List(ctx, pipeline.ListOptions{State: opts.State, Kind: opts.Kind, Tenants: opts.Tenants, Since: opts.Since, PageSize: 1000}, func(j *pipeline.JobInfo) error {
			if keep(j) {
				l.Total++
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	stats, err := c.o.Pipeline.QueueStats(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range stats {
		l.Kinds = append(l.Kinds, k.Kind)
		for r := range k.Dead {
			if !slices.Contains(l.Reasons, r) {
				l.Reasons = append(l.Reasons, r)
			}
		}
	}
	if f.Reason != "" && !slices.Contains(l.Reasons, f.Reason) {
		l.Reasons = append(l.Reasons, f.Reason)
	}
	slices.Sort(l.Reasons)
	return l, nil
}

var stateRegexp = regexp.MustCompile(`^[a-z]{1,16}$`)

// jobs lists jobs, newest first, filtered by state, kind, tenant and time.
func (c *Console) jobs(w http.ResponseWriter, r *http.Request) {
	f, opts, bad := c.parseFilter(r.URL.Query(), false)
	if bad != "" {
		c.render(w, r, http.StatusBadRequest, "refused", page{Title: "Jobs", Nav: "jobs", Error: bad})
		return
	}
	l, err := c.listPage(r.Context(), r.URL.Query(), f, opts, false)
	if err != nil {
		c.failed(w, r, "jobs", err)
		return
	}
	c.render(w, r, http.StatusOK, "jobs", page{Title: "Jobs", Nav: "jobs", Data: l})
}

// dead lists dead letters, newest first, filtered by kind, tenant, reason
// and time, with whether each payload still exists.
func (c *Console) dead(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f, opts, bad := c.parseFilter(q, true)
	if bad != "" {
		c.render(w, r, http.StatusBadRequest, "refused", page{Title: "Dead letters", Nav: "dead", Error: bad})
		return
	}
	l, err := c.listPage(ctx, q, f, opts, true)
	if err != nil {
		c.failed(w, r, "dead", err)
		return
	}
	for i := range l.Rows {
		l.Rows[i].Payload, l.Rows[i].PayloadThere = c.documentStatus(ctx, l.Rows[i].Ticket())
	}
	l.Retention = c.o.Pipeline.DeadLetterRetention()
	p := page{Title: "Dead letters", Nav: "dead", Data: l}
	// The outcome of a replay, after its redirect (see replay).
	if id, err := strconv.ParseInt(q.Get("replayed"), 10, 64); err == nil && id > 0 {
		p.Notice = "job " + strconv.FormatInt(id, 10) + " replayed: it is back in its queue"
	}
	if id, err := strconv.ParseInt(q.Get("refused"), 10, 64); err == nil && id > 0 {
		why := "it could not be replayed"
		if msg, ok := refusals[q.Get("why")]; ok {
			why = msg
		}
		p.Error = "job " + strconv.FormatInt(id, 10) + " refused: " + why
	}
	c.render(w, r, http.StatusOK, "dead", p)
}

// documentStatus says whether the document t refers to still exists:
// "inline (in the ticket)", "exists", "gone (expired or deleted)" or
// "unknown: …" (no ticket, or the store could not tell), by the store's
// existence check (pipeline.Exists: no bytes read).
func (c *Console) documentStatus(ctx context.Context, t *claimcheck.Ticket) (string, bool) {
	if t == nil {
		return "unknown: no ticket", false
	}
	if t.IsInline() {
		return "inline (in the ticket)", true
	}
	ok, err := c.o.Pipeline.Exists(ctx, t)
	switch {
	case err != nil:
		return "unknown: " + claimcheck.Reason(err), false
	case ok:
		return "exists", true
	default:
		return "gone (expired or deleted)", false
	}
}

// job is one job's page: its ticket's fields (redacted), every attempt's
// error with its reason, whether its payload and result still exist, and
// the trace it was enqueued under.
func (c *Console) job(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := pipeline.ParseJobID(r.PathValue("id"))
	if err != nil {
		c.render(w, r, http.StatusBadRequest, "refused", page{Title: "Job", Nav: "jobs", Error: "not a job id"})
		return
	}
	j, err := c.o.Pipeline.Get(ctx, id)
	if errors.Is(err, pipeline.ErrJobNotFound) {
		c.render(w, r, http.StatusNotFound, "refused", page{Title: "Job", Nav: "jobs", Error: "no job " + strconv.FormatInt(id, 10) + " (pruned, deleted or never enqueued)"})
		return
	}
	if err != nil {
		c.failed(w, r, "jobs", err)
		return
	}
	h, err := c.o.Pipeline.JobHistory(ctx, id)
	if err != nil {
		c.failed(w, r, "jobs", err)
		return
	}
	d := struct {
		jobRow
		History      []pipeline.Attempt
		TraceID      string
		Result       *pipeline.RedactedTicket
		ResultStatus string
		ResultThere  bool
	}{jobRow: c.row(j), History: h.Attempts}
	d.Payload, d.PayloadThere = c.documentStatus(ctx, j.Ticket())
	if rt := j.ResultTicket(); rt != nil {
		d.Result = pipeline.Redact(rt)
		d.ResultStatus, d.ResultThere = c.documentStatus(ctx, rt)
	}
	if h.TraceParent != "" {
		tctx := propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": h.TraceParent})
		if sc := trace.SpanContextFromContext(tctx); sc.IsValid() {
			d.TraceID = sc.TraceID().String()
		}
	}
	c.render(w, r, http.StatusOK, "job", page{Title: "Job " + strconv.FormatInt(id, 10), Nav: "jobs", Data: d})
}

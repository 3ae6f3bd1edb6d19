package httpapi

// Listing, cancelling and replaying jobs: the API's `claimcheck jobs`,
// `dead` and `dead replay`, on pipeline.List, Cancel and Replay.

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Listing bounds.
const (
	// DefaultListLimit is how many jobs a listing answers without limit.
	DefaultListLimit = 100
	// MaxListLimit is the largest limit a listing takes.
	MaxListLimit = 1000
)

// JobList answers GET /v1/jobs and GET /v1/dead: a page of jobs, newest
// first.
type JobList struct {
	Jobs []*pipeline.JobInfo `json:"jobs"`
	// NextAfter, when set, is the after parameter of the next page (the
	// last job's id); absent on the last page.
	NextAfter int64 `json:"next_after,omitempty"`
}

// ListQuery is a listing's query, checked by ParseListQuery.
type ListQuery struct {
	// Kind and State are "" for any (State: pipeline.ValidateState).
	Kind, State string
	// Tenants narrows the list to these tenants (0 to 16).
	Tenants []string
	// Limit is 1 to MaxListLimit, DefaultListLimit when not given.
	Limit int
	// After is 0, or the id after which the page starts (newest first:
	// ids below it).
	After int64
}

// ParseListQuery checks a listing's query string: kind
// (pipeline.ValidateKind), state (pipeline.ValidateState; only if
// withState), tenant (repeatable, up to 16, claimcheck.ValidateTenant),
// limit (1 to MaxListLimit) and after (a job id), all optional. Errors: a
// plain error naming the parameter.
func ParseListQuery(raw string, withState bool) (ListQuery, error) {
	known := []string{"kind", "tenant", "limit", "after"}
	if withState {
		known = append(known, "state")
	}
	var lq ListQuery
	q, err := parseQuery(raw, known...)
	if err != nil {
		return lq, err
	}
	if lq.Kind, err = one(q, "kind", false); err != nil {
		return ListQuery{}, err
	}
	if lq.Kind != "" {
		if err := pipeline.ValidateKind(lq.Kind); err != nil {
			return ListQuery{}, fmt.Errorf("kind: %w", err)
		}
	}
	if lq.State, err = one(q, "state", false); err != nil {
		return ListQuery{}, err
	}
	if lq.State != "" {
		if err := pipeline.ValidateState(lq.State); err != nil {
			return ListQuery{}, fmt.Errorf("state: %w", err)
		}
	}
	if len(q["tenant"]) > 16 {
		return ListQuery{}, errors.New("at most 16 tenant parameters")
	}
	for _, t := range q["tenant"] {
		if err := claimcheck.ValidateTenant(t); err != nil {
			return ListQuery{}, fmt.Errorf("tenant: %w", err)
		}
		lq.Tenants = append(lq.Tenants, t)
	}
	if lq.Limit, err = intParam(q, "limit", 1, MaxListLimit); err != nil {
		return ListQuery{}, err
	}
	if lq.Limit == 0 {
		lq.Limit = DefaultListLimit
	}
	after, err := one(q, "after", false)
	if err != nil {
		return ListQuery{}, err
	}
	if after != "" {
		if lq.After, err = strconv.ParseInt(after, 10, 64); err != nil || lq.After < 1 {
			return ListQuery{}, errors.New("after must be a job id (a positive integer)")
		}
	}
	return lq, nil
}

// listJobs is GET /v1/jobs.
func (a *API) listJobs(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	return a.list(w, r, pr, true)
}

// listDead is GET /v1/dead: pipeline.StateDead, broker dead letters
// included.
func (a *API) listDead(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	return a.list(w, r, pr, false)
}

// list answers a page of the jobs the principal may see: of the tenants it
// names (each one the principal's, else 403), else of all the token's
// tenants.
func (a *API) list(w http.ResponseWriter, r *http.Request, pr *principal, withState bool) *Error {
	lq, err := ParseListQuery(r.URL.RawQuery, withState)
	if err != nil {
		return refusal(http.StatusBadRequest, claimcheck.ReasonTicketInvalid, err.Error())
	}
	for _, t := range lq.Tenants {
		if !pr.allows(t) {
			return pr.forbid(t)
		}
	}
	tenants := lq.Tenants
	if len(tenants) == 0 && pr.token != nil && !pr.token.All() {
		tenants = pr.token.Tenants
	}
	state := lq.State
	if !withState {
		state = pipeline.StateDead
	}
	out := JobList{Jobs: []*pipeline.JobInfo{}}
	// One more than the page: whether there is a next.
	err = a.p.List(r.Context(), pipeline.ListOptions{Kind: lq.Kind, State: state, Tenants: tenants, Newest: true,
		AfterID: lq.After, Limit: lq.Limit + 1, PageSize: min(lq.Limit+1, 500)}, func(j *pipeline.JobInfo) error {
		out.Jobs = append(out.Jobs, j)
		return nil
	})
	if err != nil {
		return classify(err)
	}
	if len(out.Jobs) > lq.Limit {
		out.Jobs = out.Jobs[:lq.Limit]
		out.NextAfter = out.Jobs[lq.Limit-1].ID
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// cancelJob is POST /v1/jobs/{id}/cancel (pipeline.Cancel); another
// tenant's job is a missing one.
func (a *API) cancelJob(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	j, e := a.job(r, pr)
	if e != nil {
		return e
	}
	j, err := a.p.Cancel(r.Context(), j.ID)
	if err != nil {
		return classify(err)
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

// replayDead is POST /v1/dead/{id}/replay (pipeline.Replay, which checks
// the payload still exists first); another tenant's job is a missing one.
func (a *API) replayDead(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	j, e := a.job(r, pr)
	if e != nil {
		return e
	}
	j, err := a.p.Replay(r.Context(), j.ID)
	if err != nil {
		return classify(err)
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

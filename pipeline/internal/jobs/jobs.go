package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck"
)

// StateDead selects dead letters in ListOptions: River's cancelled
// (permanent failure) and discarded (attempts exhausted) jobs.
const StateDead = "dead"

// StateWaiting is the State JobInfo shows for a job waiting for
// unavailable infrastructure (the store, the keeper, the job database):
// its attempt given back, due again within RetryPolicy.MaxWaitDelay;
// Reason and Error say what it waits for. In River it is scheduled.
const StateWaiting = "waiting"

// JobInfo is a job as listings show it. It never holds payload bytes.
type JobInfo struct {
	ID          int64  `json:"id"`
	Kind        string `json:"kind"`
	Tenant      string `json:"tenant"`
	State       string `json:"state"`
	Dead        bool   `json:"dead"`
	Attempts    int    `json:"attempts"`
	MaxAttempts int    `json:"max_attempts"`
	// Priority is the job's priority, 1 (highest) to 4 (lowest).
	Priority    int       `json:"priority"`
	TicketBytes int       `json:"ticket_bytes"`
	ArgsBytes   int       `json:"args_bytes"`
	Inline      bool      `json:"inline"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256_prefix"`
	Reason      string    `json:"reason"`
	Error       string    `json:"error"`
	CreatedAt   time.Time `json:"created_at"`
	// FinalizedAt is when the job completed or died; nil while pending.
	FinalizedAt *time.Time `json:"finalized_at,omitempty"`
	HasResult   bool       `json:"has_result"`
	// Destination is set on an outbox entry: the broker destination it is
	// relayed to. Its state "completed" means the broker confirmed it.
	Destination string `json:"destination,omitempty"`
	// Store is the named store the job's documents are in (its queue's,
	// StoreQueue); empty for the default store
	// (claimcheck.DefaultStoreName) and for outbox entries.
	Store string `json:"store,omitempty"`

	ticket *claimcheck.Ticket
	result *claimcheck.Ticket
}

// Ticket is the job's ticket.
func (j *JobInfo) Ticket() *claimcheck.Ticket { return j.ticket }

// ResultTicket is the ticket of the job's result, or nil.
func (j *JobInfo) ResultTicket() *claimcheck.Ticket { return j.result }

// ErrNotOwn is InfoOf's error for a River job that is not claimcheck's
// (OwnJob).
var ErrNotOwn = errors.New("not a claimcheck job")

// ownArgs decodes row's arguments; ErrNotOwn when row is another
// program's River job (OwnJob).
func ownArgs(row *rivertype.JobRow) (*Args, error) {
	var args Args
	if err := Unmarshal(row.EncodedArgs, &args); err != nil {
		if row.Kind != LegacyRiverKind {
			return nil, ErrNotOwn // another program's arguments
		}
		return nil, err
	}
	if !OwnJob(row, &args) {
		return nil, ErrNotOwn
	}
	return &args, nil
}

func InfoOf(row *rivertype.JobRow) (*JobInfo, error) {
	a, err := ownArgs(row)
	if err != nil {
		return nil, err
	}
	args := *a
	args.Ticket = CompactJSON(args.Ticket)
	j := &JobInfo{
		ID: row.ID, Kind: args.JobKind, Tenant: args.Tenant, State: string(row.State), Destination: args.Destination,
		Dead:     row.State == rivertype.JobStateCancelled || row.State == rivertype.JobStateDiscarded,
		Attempts: row.Attempt, MaxAttempts: row.MaxAttempts, Priority: row.Priority, TicketBytes: len(args.Ticket),
		ArgsBytes: len(CompactJSON(row.EncodedArgs)), CreatedAt: row.CreatedAt, FinalizedAt: row.FinalizedAt,
	}
	if _, outbox := IsOutboxQueue(row.Queue); !outbox {
		if st := QueueStore(row.Queue); st != claimcheck.DefaultStoreName {
			j.Store = st
		}
	}
	if t, err := claimcheck.ParseTicket(args.Ticket); err == nil {
		j.ticket, j.Inline, j.Size, j.SHA256 = t, t.IsInline(), t.Size, t.DigestPrefix()
	}
	if n := len(row.Errors); n > 0 {
		reason, text := recordedError(row.Errors[n-1].Error)
		j.Error = text
		if j.Dead {
			j.Reason = reason
		}
	}
	if j.Dead && j.Reason == "" {
		j.Reason = "cancelled"
	}
	if out := row.Output(); len(out) > 0 {
		var o Output
		if err := Unmarshal(out, &o); err == nil && len(o.Result) > 0 {
			if rt, err := claimcheck.ParseTicket(o.Result); err == nil {
				j.result, j.HasResult = rt, true
			}
		} else if err == nil && !o.UnavailableSince.IsZero() && !j.Dead && row.State != rivertype.JobStateCompleted && row.State != rivertype.JobStateRunning {
			// Waiting for unavailable infrastructure, its attempt given
			// back (claimcheck.RetryPolicy): said as such, with the cause.
			j.State, j.Reason, j.Error = StateWaiting, o.WaitReason, o.WaitError
		}
	}
	return j, nil
}

// ListOptions select jobs for List. The zero value lists every job, oldest
// first (by id).
type ListOptions struct {
	// State is a River state (available, running, retryable, scheduled,
	// completed, cancelled, discarded, pending), StateDead, or for outbox
	// entries StateSent or StateRetrying. Dead includes broker dead
	// letters recorded in the inbox.
	State string
	// Kind restricts the list to one kind.
	Kind string
	// PageSize is the number of rows fetched per query. Default 100.
	PageSize int
	// Limit, if positive, stops the list after this many jobs (the first
	// matching ones in the list's order).
	Limit int
	// Tenants, if not empty, keeps only the jobs of these tenants.
	Tenants []string
	// Newest lists newest first (by id, descending) instead of oldest
	// first.
	Newest bool
	// AfterID, if positive, starts the list after the job of this id in
	// its order (the job itself need not exist): ids above it oldest
	// first, below it with Newest. A page's last id continues the list.
	AfterID int64
	// Since, if not zero, keeps only the jobs whose age is measured from
	// Since or later: a finished or dead job's FinalizedAt, a pending
	// job's CreatedAt (the AGE column of claimcheck jobs).
	Since time.Time
}

// errListLimit stops List once ListOptions.Limit jobs were listed.
var errListLimit = errors.New("pipeline: list limit reached")

// agedFrom is the time a job's age is measured from: when it finished or
// died, else when it was enqueued.
func (j *JobInfo) agedFrom() time.Time {
	if j.FinalizedAt != nil {
		return *j.FinalizedAt
	}
	return j.CreatedAt
}

var states = map[string][]rivertype.JobState{
	StateDead:     {rivertype.JobStateCancelled, rivertype.JobStateDiscarded},
	StateSent:     {rivertype.JobStateCompleted},
	StateRetrying: {rivertype.JobStateCompleted},
}

func init() {
	for _, s := range rivertype.JobStates() {
		states[string(s)] = []rivertype.JobState{s}
	}
}

// DeadIDs is Pipeline.DeadIDs (package pipeline documents it).
func (p *Jobs) DeadIDs(ctx context.Context, kind string, cutoff time.Time) ([]int64, error) {
	var ids []int64
	err := p.List(ctx, ListOptions{State: StateDead, Kind: kind}, func(j *JobInfo) error {
		if cutoff.IsZero() || j.FinalizedAt != nil && j.FinalizedAt.Before(cutoff) {
			ids = append(ids, j.ID)
		}
		return nil
	})
	return ids, err
}

// ValidateState returns nil for a state ListOptions.State takes, else an
// error of class claimcheck.ErrConfig listing them.
func ValidateState(state string) error {
	if _, ok := states[state]; !ok {
		return fmt.Errorf("unknown state %q (use dead, sent, retrying or one of River's: available, running, retryable, scheduled, completed, cancelled, discarded, pending): %w", state, claimcheck.ErrConfig)
	}
	return nil
}

// States returns the states ListOptions.State takes, sorted (for shell
// completion and messages).
func States() []string {
	out := make([]string, 0, len(states))
	for s := range states {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// List is Pipeline.List (package pipeline documents it).
func (p *Jobs) List(ctx context.Context, opts ListOptions, fn func(*JobInfo) error) error {
	if opts.Limit > 0 || !opts.Since.IsZero() {
		next, listed := fn, 0
		fn = func(j *JobInfo) error {
			if !opts.Since.IsZero() && j.agedFrom().Before(opts.Since) {
				return nil
			}
			if err := next(j); err != nil {
				return err
			}
			if listed++; opts.Limit > 0 && listed >= opts.Limit {
				return errListLimit
			}
			return nil
		}
		err := p.list(ctx, opts, fn)
		if errors.Is(err, errListLimit) {
			return nil
		}
		return err
	}
	return p.list(ctx, opts, fn)
}

func (p *Jobs) list(ctx context.Context, opts ListOptions, fn func(*JobInfo) error) error {
	order := river.SortOrderAsc
	if opts.Newest {
		order = river.SortOrderDesc
	}
	params := river.NewJobListParams().OrderBy(river.JobListOrderByID, order)
	if opts.PageSize > 0 {
		params = params.First(opts.PageSize)
	} else {
		params = params.First(100)
	}
	if opts.State != "" {
		if err := ValidateState(opts.State); err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		params = params.States(states[opts.State]...)
	}
	if opts.Kind != "" {
		if err := ValidateKind(opts.Kind); err != nil {
			return fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrConfig)
		}
		// Not by queue: outbox entries of the kind wait in their
		// destination's queue. The kind is in the arguments, compared below.
	}
	if opts.AfterID > 0 {
		// Ordered by id only, River's cursor compares the id alone.
		params = params.After(river.JobListCursorFromJob(&rivertype.JobRow{ID: opts.AfterID}))
	}
	params = params.Where(OwnJobsSQL)
	// Broker dead letters (sent outbox entries, completed in River) are
	// merged into the dead letters in the list's order.
	var brokerDead []int64
	if opts.State == StateDead {
		var err error
		if brokerDead, err = p.brokerDeadIDs(ctx, opts); err != nil {
			return err
		}
	}
	before := func(a, b int64) bool { return a < b != opts.Newest }
	emitBroker := func(upTo int64, all bool) error {
		for len(brokerDead) > 0 && (all || before(brokerDead[0], upTo)) {
			id := brokerDead[0]
			brokerDead = brokerDead[1:]
			j, err := p.Get(ctx, id)
			if errors.Is(err, ErrJobNotFound) {
				continue // pruned
			}
			if err != nil {
				return err
			}
			if !j.Dead || !opts.matches(j) {
				continue // replayed since, or another kind or tenant
			}
			if err := fn(j); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		res, err := p.client.JobList(ctx, params)
		if err != nil {
			return fmt.Errorf("pipeline: list jobs: %w", err)
		}
		for _, row := range res.Jobs {
			if err := emitBroker(row.ID, false); err != nil {
				return err
			}
			j, err := InfoOf(row)
			if errors.Is(err, ErrNotOwn) {
				continue // OwnJobsSQL selected none such
			}
			if err != nil {
				return err
			}
			if !opts.matches(j) {
				continue
			}
			if err := p.overlayInbox(ctx, j); err != nil {
				return err
			}
			if st := opts.State; (st == string(rivertype.JobStateCompleted) || st == StateSent || st == StateRetrying) && j.State != st {
				continue // an outbox entry's consumer outcome decides
			}
			if err := fn(j); err != nil {
				return err
			}
		}
		if len(res.Jobs) == 0 || res.LastCursor == nil {
			break
		}
		params = params.After(res.LastCursor)
	}
	return emitBroker(0, true)
}

// matches reports whether j is of the options' kind and tenants.
func (o *ListOptions) matches(j *JobInfo) bool {
	return (o.Kind == "" || j.Kind == o.Kind) && (len(o.Tenants) == 0 || slices.Contains(o.Tenants, j.Tenant))
}

// brokerDeadIDs returns the ids of the sent outbox entries whose consumer
// dead-lettered their message (broker dead letters), in the list's order
// and after its AfterID; whether each is still dead is for the caller.
func (p *Jobs) brokerDeadIDs(ctx context.Context, opts ListOptions) ([]int64, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT DISTINCT job_id FROM claimcheck_consumed WHERE action = 'dead-lettered' AND job_id > 0 ORDER BY job_id`)
	if err != nil {
		return nil, fmt.Errorf("pipeline: list broker dead letters: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pipeline: list broker dead letters: %w", err)
		}
		if opts.AfterID > 0 && (id == opts.AfterID || (id < opts.AfterID) != opts.Newest) {
			continue
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("pipeline: list broker dead letters: %w", err)
	}
	if opts.Newest {
		slices.Reverse(ids)
	}
	return ids, nil
}

// JobNotFound is Get's error for job id when there is no such job
// (ErrJobNotFound), for callers that must answer a job they may not show
// exactly as a missing one.
func JobNotFound(id int64) error { return fmt.Errorf("pipeline: job %d: %w", id, ErrJobNotFound) }

// Get is Pipeline.Get (package pipeline documents it).
func (p *Jobs) Get(ctx context.Context, id int64) (*JobInfo, error) {
	row, err := p.jobRow(ctx, id)
	if err != nil {
		return nil, err
	}
	j, err := InfoOf(row)
	if err != nil {
		return nil, err
	}
	if err := p.overlayInbox(ctx, j); err != nil {
		return nil, err
	}
	return j, nil
}

// jobRow is River's row of job id, one of ours.
// Errors: ErrJobNotFound; the job database's, wrapped.
func (p *Jobs) jobRow(ctx context.Context, id int64) (*rivertype.JobRow, error) {
	row, err := p.client.JobGet(ctx, id)
	if errors.Is(err, river.ErrNotFound) {
		return nil, JobNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: get job %d: %w", id, err)
	}
	if _, err := ownArgs(row); errors.Is(err, ErrNotOwn) {
		return nil, JobNotFound(id)
	}
	return row, nil
}

// Outbox entry states, as Get and List show them once the relay has sent
// the entry (River's state "completed").
const (
	// StateSent: the broker confirmed the entry; no consumer has recorded
	// an outcome in the inbox yet, or the latest was a release (a stopping
	// consumer returned it unworked, attempt not spent).
	StateSent = "sent"
	// StateRetrying: a consumer's attempt failed and the broker holds the
	// message for a later one.
	StateRetrying = "retrying"
)

// overlayInbox shows a sent outbox entry as its consumer's latest outcome
// in the inbox: completed (with its result), retrying, dead (a broker dead
// letter, with its reason), or sent when none is recorded yet.
func (p *Jobs) overlayInbox(ctx context.Context, j *JobInfo) error {
	if j.Destination == "" || j.State != string(rivertype.JobStateCompleted) {
		return nil
	}
	var action, reason, errText string
	var attempt int
	var result sql.NullString
	// With several consuming queues (broker fan-out), a dead letter in
	// any of them shows, then a retry, then the latest acknowledgement.
	err := p.db.QueryRowContext(ctx, `SELECT action, attempt, reason, error, result FROM claimcheck_consumed
		WHERE job_id = $1 ORDER BY CASE action WHEN 'dead-lettered' THEN 0 WHEN 'acked' THEN 2 ELSE 1 END, updated_at DESC LIMIT 1`, j.ID).Scan(&action, &attempt, &reason, &errText, &result)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		j.State = StateSent
		return nil
	case err != nil:
		return fmt.Errorf("pipeline: job %d: inbox: %w", j.ID, err)
	}
	j.Attempts = attempt
	switch action {
	case "acked":
		j.State = string(rivertype.JobStateCompleted)
	case "released":
		// Back in the queue: the released attempt is not spent.
		j.State, j.Attempts = StateSent, attempt-1
	case "dead-lettered":
		j.State, j.Dead, j.Reason, j.Error = StateDead, true, reason, errText
	default:
		j.State, j.Reason, j.Error = StateRetrying, reason, errText
	}
	if result.Valid {
		if j.result, err = claimcheck.ParseTicket([]byte(result.String)); err != nil {
			return err
		}
		j.HasResult = true
	}
	return nil
}

// ErrJobFinished is returned by Cancel for a job that has finished: it
// completed, died (a dead letter: replay it instead), or is an outbox entry
// the broker has confirmed.
var ErrJobFinished = errors.New("job already finished")

// Cancel is Pipeline.Cancel (package pipeline documents it).
func (p *Jobs) Cancel(ctx context.Context, id int64) (*JobInfo, error) {
	j, err := p.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.FinalizedAt != nil || j.Dead {
		return nil, fmt.Errorf("pipeline: cancel job %d in state %s: %w", id, j.State, ErrJobFinished)
	}
	row, err := p.client.JobCancel(ctx, id)
	if errors.Is(err, river.ErrNotFound) {
		return nil, JobNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: cancel job %d: %w", id, err)
	}
	if row.State == rivertype.JobStateCompleted || row.State == rivertype.JobStateDiscarded {
		// It finished meanwhile.
		return nil, fmt.Errorf("pipeline: cancel job %d in state %s: %w", id, row.State, ErrJobFinished)
	}
	return InfoOf(row)
}

// ErrNotDead is returned by Replay for a job that is not a dead letter.
var ErrNotDead = errors.New("job is not dead")

// ErrNoResult is returned by OpenResult for a job without a result.
var ErrNoResult = errors.New("job has no result")

// ErrPayloadGone is returned by Replay for a dead letter whose payload
// object no longer exists (expired by lifecycle, swept, or deleted), with
// claimcheck.ErrPayloadMissing.
var ErrPayloadGone = errors.New("payload expired or deleted: nothing to replay")

// Replay is Pipeline.Replay (package pipeline documents it).
func (p *Jobs) Replay(ctx context.Context, id int64) (*JobInfo, error) {
	j, err := p.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !j.Dead {
		return nil, fmt.Errorf("pipeline: replay job %d in state %s: %w", id, j.State, ErrNotDead)
	}
	if t := j.ticket; t != nil && !t.IsInline() {
		st, err := p.storeFor(t)
		if err != nil {
			return nil, fmt.Errorf("pipeline: replay job %d: %w", id, err)
		}
		info, err := st.Stat(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("pipeline: replay job %d: check its payload: %w", id, err)
		}
		if !info.Exists {
			return nil, fmt.Errorf("pipeline: replay job %d (%s): %w: %w", id, t, ErrPayloadGone, claimcheck.ErrPayloadMissing)
		}
		if t.Manifest {
			if err := p.documentsExist(ctx, st, id, t); err != nil {
				return nil, err
			}
		}
	}
	row, err := p.client.JobRetry(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("pipeline: replay job %d: %w", id, err)
	}
	return InfoOf(row)
}

// documentsExist checks that every document t's manifest lists still
// exists: ErrPayloadGone, naming the first missing one (by name, never
// key), when one does not.
func (p *Jobs) documentsExist(ctx context.Context, st *claimcheck.Store, id int64, t *claimcheck.Ticket) error {
	m, err := st.ReadManifest(ctx, t)
	if err != nil {
		return fmt.Errorf("pipeline: replay job %d: read its manifest: %w", id, err)
	}
	check := func(name string, d *claimcheck.Ticket) error {
		info, err := st.Stat(ctx, d)
		if err != nil {
			return fmt.Errorf("pipeline: replay job %d: check its %s: %w", id, documentName(name), err)
		}
		if !info.Exists {
			return &AttachmentGoneError{JobID: id, Name: name, ticket: d.String()}
		}
		return nil
	}
	if m.Payload != nil {
		if err := check("", m.Payload); err != nil {
			return err
		}
	}
	for _, a := range m.Attachments {
		if err := check(a.Name, a.Ticket); err != nil {
			return err
		}
	}
	return nil
}

// AttachmentGoneError is Replay's refusal of a job with attachments one of
// whose documents is gone; errors.Is matches it with ErrPayloadGone and
// claimcheck.ErrPayloadMissing. Its message names the document, never its
// key.
type AttachmentGoneError struct {
	// JobID is the dead letter's id.
	JobID int64
	// Name is the missing attachment's name, "" for the job's main payload.
	Name   string
	ticket string // the document's redacted identity (Ticket.String)
}

func (e *AttachmentGoneError) Error() string {
	return fmt.Sprintf("pipeline: replay job %d: its %s (%s) is gone: %v: %v", e.JobID, documentName(e.Name), e.ticket, ErrPayloadGone, claimcheck.ErrPayloadMissing)
}

// Unwrap gives ErrPayloadGone and claimcheck.ErrPayloadMissing.
func (e *AttachmentGoneError) Unwrap() []error {
	return []error{ErrPayloadGone, claimcheck.ErrPayloadMissing}
}

// documentName names a document of a manifest for messages: `attachment
// "NAME"`, or "main payload" for "".
func documentName(name string) string {
	if name == "" {
		return "main payload"
	}
	return fmt.Sprintf("attachment %q", name)
}

// OpenResult is Pipeline.OpenResult (package pipeline documents it).
func (p *Jobs) OpenResult(ctx context.Context, id int64) (io.ReadCloser, *claimcheck.Ticket, error) {
	pl, err := p.claimResult(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	r, err := pl.Open(ctx)
	if err != nil {
		pl.Close()
		return nil, nil, fmt.Errorf("pipeline: job %d: its result: %w", id, err)
	}
	return readCloser{r, pl}, pl.Ticket(), nil
}

// WriteResult is Pipeline.WriteResult (package pipeline documents it).
func (p *Jobs) WriteResult(ctx context.Context, id int64, path string) (*claimcheck.Ticket, error) {
	pl, err := p.claimResult(ctx, id)
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	if err := pl.WriteFile(ctx, path); err != nil {
		return nil, fmt.Errorf("pipeline: job %d: its result: %w", id, err)
	}
	return pl.Ticket(), nil
}

// claimResult claims a job's result, unopened.
func (p *Jobs) claimResult(ctx context.Context, id int64) (*claimcheck.Payload, error) {
	j, err := p.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.result == nil {
		return nil, fmt.Errorf("pipeline: job %d (%s): %w", id, j.State, ErrNoResult)
	}
	st, err := p.storeFor(j.result)
	if err != nil {
		return nil, fmt.Errorf("pipeline: job %d: its result: %w", id, err)
	}
	pl, err := st.Claim(j.result)
	if err != nil {
		return nil, fmt.Errorf("pipeline: job %d: its result: %w", id, err)
	}
	return pl, nil
}

type readCloser struct {
	io.Reader
	p *claimcheck.Payload
}

func (r readCloser) Close() error { return r.p.Close() }

// Delete is Pipeline.Delete (package pipeline documents it).
func (p *Jobs) Delete(ctx context.Context, ids ...int64) (int, error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("pipeline: delete jobs: %w", err)
	}
	defer tx.Rollback()
	n := 0
	for _, id := range ids {
		_, err := p.client.JobDeleteTx(ctx, tx, id)
		if errors.Is(err, river.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("pipeline: delete job %d: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM claimcheck_claim WHERE job_id = $1`, id); err != nil {
			return 0, fmt.Errorf("pipeline: delete the registry rows of job %d: %w", id, err)
		}
		n++
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("pipeline: delete jobs: %w", err)
	}
	return n, nil
}

// ParseJobID parses a job id argument. Errors: ErrJobNotFound for anything
// that is not a positive integer.
func ParseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("pipeline: %q is not a job id (a positive integer): %w", s, ErrJobNotFound)
	}
	return id, nil
}

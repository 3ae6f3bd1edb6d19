package worker

// Keeping a handler's finished work: the result's check-in, its registry
// row and the job's completion, each retried on its own through an outage.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline/internal/inbox"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
)

// finish keeps a handler's finished work: the result's check-in, its
// registry row and the job's completion (in one transaction, River's
// JobCompleteTx) are each retried on their own, with the policy's backoff,
// until they succeed or the job's time runs out. Only a permanent failure
// (a result too large, say) ends it early.
//
// The result is checked in as a payload is (CheckIn): its check-in intent
// is committed before the upload and turned into its registry row by the
// completion (anchor), so no sweep deletes a result about to be committed,
// whatever the clocks. Should the completion find the object gone (its
// intent outlived the sweeper's grace period, a stall that long, and a
// sweep removed it), the result is checked in again and the completion
// retried. If finish gives up, the result's intent goes: its object is
// litter a sweep removes, and the next attempt checks the result in anew.
//
// Should the first try of the completion fail, the job's outcome record
// (the result ticket) is written to the store at okey before it is
// retried, so that a later attempt completes the job from it rather than
// run the handler again (docs/invariants.md, invariant 12).
func (w *Worker) finish(ctx context.Context, st *claimcheck.Store, job *river.Job[jobs.WorkArgs], res *claimcheck.Result, okey string) (ferr error) {
	if res == nil || res.Body == nil {
		// No result: nothing to register with the completion, so River's
		// completer completes the job (batched, as for any River job),
		// rather than a transaction of our own that River's completer
		// then repeats: the second completion was a quarter of a small
		// job's CPU on SQLite. River retries its completion for 7 to 37 s
		// (three tries); a job whose completion the database refuses for
		// longer is rescued after its lease and run again.
		var prev jobs.Output
		if out := job.Output(); len(out) > 0 {
			_ = json.Unmarshal(out, &prev)
		}
		if !prev.UnavailableSince.IsZero() {
			if err := river.RecordOutput(ctx, jobs.Output{}); err != nil { // the outage is over
				return fmt.Errorf("pipeline: record the job's output: %w", err)
			}
		}
		return nil
	}
	var rt *claimcheck.Ticket
	recorded := false // the outcome record is written
	id := strconv.FormatInt(job.ID, 10)
	// writeRecord writes the job's outcome record, naming rt, because of
	// cause (the database's failure).
	writeRecord := func(cause error) {
		rec := &inbox.OutcomeRecord{Job: id, Kind: job.Args.JobKind, Attempt: job.Attempt}
		if rt != nil {
			enc, err := rt.Marshal()
			if err != nil {
				return
			}
			rec.Result = enc
		}
		if err := inbox.WriteOutcome(ctx, st, okey, rec); err != nil {
			w.h.Logger.WarnContext(ctx, "pipeline: write a finished job's outcome record", "job", job.ID, "error", err.Error())
			return
		}
		recorded = true
		w.say("job %d: its handler's outcome is recorded in the store (%v): no later attempt runs the handler again", job.ID, cause)
	}
	checkIn := func() error { return nil }
	if res != nil && res.Body != nil {
		body, cleanup, err := rewindable(res.Body, "")
		if err != nil {
			return err
		}
		defer cleanup()
		checkIn = func() error {
			return w.UntilDone(ctx, job.ID, "check in the result", func() error {
				if _, err := body.Seek(0, io.SeekStart); err != nil {
					return claimcheck.Permanent(fmt.Errorf("pipeline: rewind the result: %w", err))
				}
				copts := &claimcheck.CheckInOptions{ContentType: res.ContentType, Result: true}
				var err error
				rt, err = w.h.Intents.CheckInResult(ctx, st, job.Args.Tenant, body, copts)
				if err != nil {
					return fmt.Errorf("claimcheck: check in result of %s: %w", job.Args.JobKind, err)
				}
				return nil
			})
		}
		if err := checkIn(); err != nil {
			return err
		}
		defer func() {
			if ferr != nil && !recorded {
				// The result's object is litter a sweep removes; the next
				// attempt checks the result in anew. Not so once the
				// outcome record names it: the next attempt completes
				// the job with it (anchor finds the object).
				w.h.Intents.DropIntent(ctx, rt)
			}
		}()
	}
	first := true
	err := w.complete(ctx, job, &rt, checkIn, func(err error) {
		if !first || err == nil || claimcheck.IsPermanent(err) {
			return
		}
		first = false
		if !recorded {
			writeRecord(err)
		}
	})
	if err == nil && recorded {
		inbox.DeleteOutcome(ctx, w.h.Logger, st, okey, id)
	}
	return err
}

// complete records *result (nil: no result) as job's result and completes
// the job: the result's registry row (anchored, see finish) and River's
// completion in one transaction, retried by UntilDone. checkIn checks the
// result in again, setting *result, should its object be found gone.
// afterTry, if given, is called with each try's error (nil on success).
func (w *Worker) complete(ctx context.Context, job *river.Job[jobs.WorkArgs], result **claimcheck.Ticket, checkIn func() error, afterTry ...func(error)) error {
	record := func() error {
		var out jobs.Output
		if rt := *result; rt != nil {
			enc, err := rt.Marshal()
			if err != nil {
				return err
			}
			out.Result = enc
		}
		if err := river.RecordOutput(ctx, out); err != nil {
			return fmt.Errorf("pipeline: record result ticket: %w", err)
		}
		return nil
	}
	if err := record(); err != nil {
		return err
	}
	return w.UntilDone(ctx, job.ID, "record the result and complete the job", func() error {
		err := w.completeTx(ctx, job, *result, checkIn, record)
		for _, f := range afterTry {
			f(err)
		}
		return err
	})
}

// completeTx is one try of complete.
func (w *Worker) completeTx(ctx context.Context, job *river.Job[jobs.WorkArgs], rt *claimcheck.Ticket, checkIn, record func() error) error {
	err := jobdb.InTx(ctx, w.h.DB, func(tx *sql.Tx) error {
		if rt != nil {
			if err := w.h.Intents.Anchor(ctx, tx, rt, "record the result"); err != nil {
				return err
			}
			if err := jobdb.Register(ctx, tx, job.ID, jobdb.RoleResult, rt); err != nil {
				return err
			}
		}
		_, err := river.JobCompleteTx[riverdriver.Driver[*sql.Tx]](ctx, tx, job)
		return err
	})
	if rt != nil && errors.Is(err, claimcheck.ErrPayloadMissing) {
		if err := checkIn(); err != nil {
			return err
		}
		if err := record(); err != nil {
			return err
		}
		return fmt.Errorf("pipeline: job %d: its result's object was deleted before its registry row was written (its check-in intent outlived the sweeper's grace period); checked in again", job.ID)
	}
	return err
}

// UntilDone runs step, a step of finishing job id's finished work, until
// it succeeds, fails permanently, or ctx (the job's time) is done, pausing
// by the retry policy's WaitDelay between tries: each failure is a wait for
// infrastructure (the store, the job database), so the job resumes within
// seconds of its return (claimcheck.RetryPolicy.MaxWaitDelay). The first
// failure and every one after the 2nd, 4th, 8th... try in a row are said
// on w's Notify (WorkOptions.Notify: the command's standard error), with
// the job, the cause and the next try.
func (w *Worker) UntilDone(ctx context.Context, id int64, what string, step func() error) error {
	for n := 1; ; n++ {
		back := w.h.back.wait()
		err := step()
		if err == nil || claimcheck.IsPermanent(err) {
			if err == nil && n > 1 {
				w.say("job %d: %s succeeded on try %d", id, what, n)
				w.h.back.wake() // what it waited for is back
			}
			return err
		}
		pause := w.h.Retry.WaitDelay(n)
		w.h.Logger.WarnContext(ctx, "pipeline: finishing a job failed, retrying", "job", id, "step", what, "try", n, "error", err.Error(), "next_try_in", pause.String())
		if n&(n-1) == 0 { // 1, 2, 4, 8...
			w.say("job %d: waiting: %s failed (try %d, %s): %v; next try in %s", id, what, n, claimcheck.Reason(err), err, pause.Round(100*time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pipeline: %s: gave up when the job's time ran out: %w", what, err)
		case <-time.After(pause):
		case <-back:
			// Another job's wait just ended: try now.
		}
	}
}

// backSignal wakes, at once, the jobs of one process that wait in place
// for unavailable infrastructure (UntilDone) when another job of the
// process finds it back (its wait ended in success), so that they do not
// sit out the rest of their pauses (up to
// claimcheck.RetryPolicy.MaxWaitDelay).
type backSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed by the next wake.
func (b *backSignal) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// wake closes the channel wait returned, if any.
func (b *backSignal) wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// say passes one line to WorkOptions.Notify, if set.
func (w *Worker) say(format string, args ...any) {
	if w.notify != nil {
		w.notify(fmt.Sprintf(format, args...))
	}
}

// rewindable returns r as a seekable reader: r itself if it is an
// *os.File or another io.ReadSeeker, else a copy spooled to an unlinked
// temporary file in dir, so that a check-in can be retried.
func rewindable(r io.Reader, dir string) (io.ReadSeeker, func(), error) {
	if rs, ok := r.(io.ReadSeeker); ok {
		return rs, func() {}, nil
	}
	f, err := os.CreateTemp(dir, "claimcheck-result-*")
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: spool the result: %w", err)
	}
	os.Remove(f.Name()) // unlinked: nothing is left behind
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("pipeline: spool the result: %w", err)
	}
	return f, func() { f.Close() }, nil
}

package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// Outcome records (docs/invariants.md, invariant 12). Once a handler has
// returned, its outcome is what must not be lost: the handler's effect is
// the one thing claimcheck cannot take back. The job database records it
// with the job's completion; when that completion fails on its first try
// (the database is unavailable), the worker first writes the outcome to
// the job's store, under OutcomeKey, and only then keeps retrying the
// completion. Every later attempt of a job that has been attempted before
// reads the record before it runs the handler, and settles the job from
// it instead. The fast path (the completion succeeds at once) writes no
// record: no PUT is added to a job that meets no outage.

// outcomeVersion is the version of the outcome record's JSON.
const outcomeVersion = 1

// OutcomeRecord is an outcome record: what a finished handler came to. It
// holds no payload bytes: the result is referred to by its ticket (an
// inline result's ticket carries its sealed bytes, as the job's output in
// the job database does).
type OutcomeRecord struct {
	Version int    `json:"version"`
	Job     string `json:"job"` // the job's id, or a broker message's key
	Kind    string `json:"kind"`
	Attempt int    `json:"attempt"`
	// Result is the result ticket, encoded; empty for a handler that
	// returned no result.
	Result json.RawMessage `json:"result,omitempty"`
	// Written is when the record was written, UTC.
	Written time.Time `json:"written"`
}

// OutcomeKey is the key, inside the store's namespace, of the outcome
// record of the job id created at created: outcomes/<id>-<created, in
// microseconds since the Unix epoch, base 36>.json. The creation time
// tells apart two jobs of one id (a job database recreated on the same
// namespace).
func OutcomeKey(id string, created time.Time) string {
	return claimcheck.PrefixOutcomes + id + "-" + strconv.FormatInt(created.UnixMicro(), 36) + ".json"
}

// WriteOutcome writes rec at key. Errors: the store's, classified
// (claimcheck.StoreError).
func WriteOutcome(ctx context.Context, st *claimcheck.Store, key string, rec *OutcomeRecord) error {
	rec.Version = outcomeVersion
	rec.Written = time.Now().UTC()
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("pipeline: encode the outcome record of job %s: %w", rec.Job, err)
	}
	if err := st.Bucket().WriteAll(ctx, key, append(b, '\n'), &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return claimcheck.StoreError("pipeline: write the outcome record of job "+rec.Job, err)
	}
	return nil
}

// ReadOutcome reads the outcome record at key: nil, nil when there is
// none. Errors: the store's, classified; claimcheck.ErrPayloadCorrupt for
// a record that does not parse.
func ReadOutcome(ctx context.Context, st *claimcheck.Store, key, job string) (*OutcomeRecord, error) {
	r, err := st.Bucket().NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, claimcheck.StoreError("pipeline: read the outcome record of job "+job, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return nil, claimcheck.StoreError("pipeline: read the outcome record of job "+job, err)
	}
	var rec OutcomeRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Version != outcomeVersion {
		return nil, fmt.Errorf("pipeline: the outcome record of job %s does not parse (version %d): %v: %w", job, rec.Version, err, claimcheck.ErrPayloadCorrupt)
	}
	return &rec, nil
}

// DeleteOutcome removes the outcome record at key once its job is
// settled; a failure only leaves it for the sweep, with a warning to
// logger.
func DeleteOutcome(ctx context.Context, logger *slog.Logger, st *claimcheck.Store, key, job string) {
	if err := st.Bucket().Delete(context.WithoutCancel(ctx), key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		logger.WarnContext(ctx, "pipeline: delete a settled job's outcome record (a sweep removes it)", "job", job, "error", err.Error())
	}
}

// BrokerOutcomeKey is the key, inside the store's namespace, of the
// outcome record of the message with idempotency key id consumed from
// queue: outcomes/broker-<the first 32 hex digits of SHA-256(queue, NUL,
// id)>.json. Hashed, so that neither name (chosen by producers) reaches a
// key; a sweep removes a record left behind by its age, as it does a
// job's.
func BrokerOutcomeKey(queue, id string) string {
	sum := sha256.Sum256([]byte(queue + "\x00" + id))
	return claimcheck.PrefixOutcomes + "broker-" + hex.EncodeToString(sum[:16]) + ".json"
}

// KeepOutcome implements broker.OutcomeKeeper: it writes o's outcome
// record (its result ticket, no payload bytes) to the pipeline's store.
// Errors: the store's, classified.
func (in Inbox) KeepOutcome(ctx context.Context, o broker.Outcome) error {
	rec := &OutcomeRecord{Job: o.ID, Kind: o.Kind, Attempt: o.Attempt}
	if o.Result != nil {
		enc, err := o.Result.Marshal()
		if err != nil {
			return err
		}
		rec.Result = enc
	}
	return WriteOutcome(ctx, in.h.Store, BrokerOutcomeKey(o.Queue, o.ID), rec)
}

// KeptOutcome implements broker.OutcomeKeeper. Errors: the store's,
// classified; claimcheck.ErrPayloadCorrupt for a record or result ticket
// that does not parse.
func (in Inbox) KeptOutcome(ctx context.Context, o broker.Outcome) (*claimcheck.Ticket, bool, error) {
	rec, err := ReadOutcome(ctx, in.h.Store, BrokerOutcomeKey(o.Queue, o.ID), o.ID)
	if err != nil || rec == nil {
		return nil, false, err
	}
	if len(rec.Result) == 0 {
		return nil, true, nil
	}
	rt, err := claimcheck.ParseTicket(rec.Result)
	if err != nil {
		return nil, false, fmt.Errorf("pipeline: the result ticket of message %s's outcome record: %v: %w", o.ID, err, claimcheck.ErrPayloadCorrupt)
	}
	return rt, true, nil
}

// ForgetOutcome implements broker.OutcomeKeeper.
func (in Inbox) ForgetOutcome(ctx context.Context, o broker.Outcome) {
	DeleteOutcome(ctx, in.h.Logger, in.h.Store, BrokerOutcomeKey(o.Queue, o.ID), o.ID)
}

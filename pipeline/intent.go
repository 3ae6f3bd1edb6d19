package pipeline

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/registry"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
)

// CheckIn checks r in for tenant as Store().CheckIn does, after committing
// a check-in intent for the object's key to the job database (once the
// payload is read and its key known, before anything is written at the key
// or an object already there is reused). While the intent is live no sweep
// deletes the object, whatever the clocks; EnqueueTx turns it into the
// registry row. Check-ins that reuse an object serialise with deletions of
// it (see internal/registry), so a reused object exists when CheckIn
// returns, with its age refreshed.
//
// A ticket checked in here and never enqueued leaves its intent until a
// sweep older than its grace period removes it (and then the object, as an
// orphan). Inline tickets record nothing.
//
// The pipeline's workers check handlers' results in here too, so results
// are protected the same way until their registry rows commit.
//
// Errors: Store.CheckIn's; the database's, wrapped with
// claimcheck.ErrUnavailable, with nothing stored.
func (p *Pipeline) CheckIn(ctx context.Context, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
	return p.checkInTo(ctx, p.store, tenant, r, opts)
}

// CheckInTo is CheckIn into the pipeline's store of that name ("": the
// default store), for EnqueueTx callers whose jobs go to a named store.
// Errors: ErrStoreNotConfigured (with claimcheck.ErrConfig), with nothing
// stored; otherwise CheckIn's.
func (p *Pipeline) CheckInTo(ctx context.Context, store, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
	st, err := p.StoreNamed(store)
	if err != nil {
		return nil, err
	}
	return p.checkInTo(ctx, st, tenant, r, opts)
}

func (p *Pipeline) checkInTo(ctx context.Context, st *claimcheck.Store, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
	if err := p.recordStoreKey(ctx, st); err != nil {
		return nil, err
	}
	return p.checkInWith(ctx, opts, false, func(o *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
		return st.CheckIn(ctx, tenant, r, o)
	})
}

// checkInResult checks a handler's result in to st as checkInTo does,
// except that should the job database be unavailable for its check-in
// intent, the result is checked in without it rather than the handler's
// work lost: the sweeper's grace period (at least an hour) keeps the
// object, the caller keeps an outcome record naming it, and the result's
// registry row, once the database is back, finds the object (anchor).
// The store's key must be recorded first (a process that recorded it asks
// the database nothing), so nothing is sealed under a key the job database
// does not know (docs/invariants.md, invariant 9). Used by the worker's
// finish and the broker inbox alike (invariant 12).
func (p *Pipeline) checkInResult(ctx context.Context, st *claimcheck.Store, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
	if err := p.recordStoreKey(ctx, st); err != nil {
		return nil, err
	}
	return p.checkInWith(ctx, opts, true, func(o *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
		return st.CheckIn(ctx, tenant, r, o)
	})
}

// CheckInManifest checks a manifest in for tenant as CheckIn checks a
// payload in (its intent committed first), with Store().CheckInManifest:
// check each document m lists in with CheckIn first. EnqueueTx turns the
// intents of the manifest and of its documents into registry rows.
//
// Errors: Store.CheckInManifest's; the database's, as CheckIn.
func (p *Pipeline) CheckInManifest(ctx context.Context, tenant string, m *claimcheck.Manifest) (*claimcheck.Ticket, error) {
	return p.checkInManifestTo(ctx, p.store, tenant, m)
}

func (p *Pipeline) checkInManifestTo(ctx context.Context, st *claimcheck.Store, tenant string, m *claimcheck.Manifest) (*claimcheck.Ticket, error) {
	if err := p.recordStoreKey(ctx, st); err != nil {
		return nil, err
	}
	return p.checkInWith(ctx, nil, false, func(o *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
		return st.CheckInManifest(ctx, tenant, m, o)
	})
}

// checkInWith runs checkIn (a store check-in) with opts and a BeforeStore
// hook that commits the check-in intent first. withoutIntent: an intent
// the database cannot record is logged and the check-in goes on without
// it (a handler's result, checkInResult); otherwise it fails the
// check-in with claimcheck.ErrUnavailable.
func (p *Pipeline) checkInWith(ctx context.Context, opts *claimcheck.CheckInOptions, withoutIntent bool, checkIn func(*claimcheck.CheckInOptions) (*claimcheck.Ticket, error)) (*claimcheck.Ticket, error) {
	var o claimcheck.CheckInOptions
	if opts != nil {
		o = *opts
	}
	recorded := false
	hook := o.BeforeStore
	o.BeforeStore = func(ctx context.Context, t *claimcheck.Ticket) error {
		if hook != nil {
			if err := hook(ctx, t); err != nil {
				return err
			}
		}
		if err := registry.RecordIntent(ctx, p.db, p.dialect, t.Key, t.Tenant, t.Created.UnixNano()); err != nil {
			if withoutIntent {
				p.logger.WarnContext(ctx, "pipeline: a result checked in without its check-in intent (the job database is unavailable): its outcome record keeps it", "tenant", t.Tenant, "error", err.Error())
				return nil
			}
			return fmt.Errorf("pipeline: %w: %w", err, claimcheck.ErrUnavailable)
		}
		recorded = true
		return nil
	}
	t, err := checkIn(&o)
	if err != nil && recorded {
		// Nothing to protect: the check-in left no object of its own (a
		// failed check-in leaves none at its key).
		p.dropIntent(ctx, t)
	}
	return t, err
}

// dropIntent removes t's intent, if any, best effort: one left behind only
// keeps the object until a sweep past its grace period.
func (p *Pipeline) dropIntent(ctx context.Context, t *claimcheck.Ticket) {
	if t == nil || t.IsInline() {
		return
	}
	_, _ = registry.DropIntent(context.WithoutCancel(ctx), p.db, t.Key, t.Created.UnixNano())
}

// anchor is the guard against committing a registry row whose object is
// gone, for a payload (EnqueueTx, step "enqueue") and a handler's result
// (the worker's completion, step "record the result"): it takes the key's
// lock for the rest of tx, then removes t's check-in intent (the registry
// row written in the same transaction takes over). Without an intent (a
// ticket from Store().CheckIn, or one whose intent a sweep reclaimed after
// its grace period) it checks that the object exists; an object gone is
// claimcheck.ErrPayloadMissing. The lock comes first so that a sweep that
// judged the intent stale cannot delete the object after this transaction
// removed the intent and before it commits: the sweep's deletion waits for
// the commit and then sees the registry row.
func (p *Pipeline) anchor(ctx context.Context, tx *sql.Tx, t *claimcheck.Ticket, step string) error {
	if t.IsInline() {
		return nil
	}
	if err := registry.Lock(ctx, tx, p.dialect, t.Key); err != nil {
		return fmt.Errorf("pipeline: %s %s: %w", step, t, err)
	}
	had, err := registry.DropIntent(ctx, tx, t.Key, t.Created.UnixNano())
	if err != nil {
		return fmt.Errorf("pipeline: %s %s: %w", step, t, err)
	}
	if had {
		return nil
	}
	st, err := p.storeFor(t)
	if err != nil {
		return fmt.Errorf("pipeline: %s %s: %w", step, t, err)
	}
	ok, err := st.Bucket().Exists(ctx, t.Key)
	if err != nil {
		return claimcheck.StoreError("pipeline: "+step+" "+t.String()+": look up its object", err)
	}
	if !ok {
		return fmt.Errorf("pipeline: %s %s: its object is gone (deleted as an orphan before its registry row was written: check it in again): %w", step, t, claimcheck.ErrPayloadMissing)
	}
	return nil
}

// discard deletes the object t's check-in stored (or reused) for a job
// that was not written, unless a registry row or another check-in intent
// holds it; t's own intent goes with it.
func (p *Pipeline) discard(ctx context.Context, t *claimcheck.Ticket) error {
	_, err := p.deleteUnheld(context.WithoutCancel(ctx), t, func(tx *sql.Tx) error {
		_, err := registry.DropIntent(ctx, tx, t.Key, t.Created.UnixNano())
		return err
	})
	return err
}

// deleteUnheld is the one way the pipeline deletes an object: in a
// transaction holding the key's lock, it runs release (which removes the
// caller's own hold: a registry row or an intent), then deletes the object
// from the store if no registry row and no check-in intent is left,
// committing after the store's delete (a failed delete rolls release back).
// It reports whether the object was deleted.
func (p *Pipeline) deleteUnheld(ctx context.Context, t *claimcheck.Ticket, release func(*sql.Tx) error) (bool, error) {
	if t == nil || t.IsInline() {
		return false, nil
	}
	st, err := p.storeFor(t)
	if err != nil {
		return false, err
	}
	deleted := false
	err = registry.InTx(ctx, p.db, func(tx *sql.Tx) error {
		if err := registry.Lock(ctx, tx, p.dialect, t.Key); err != nil {
			return err
		}
		if err := release(tx); err != nil {
			return err
		}
		rows, intents, err := registry.Holders(ctx, tx, t.Key)
		if err != nil || rows+intents > 0 {
			return err
		}
		if err := st.Bucket().Delete(ctx, t.Key); err != nil {
			if gcerrors.Code(err) == gcerrors.NotFound {
				return nil // gone already: not deleted by this call
			}
			return claimcheck.StoreError("delete object", err)
		}
		deleted = true
		return nil
	})
	return deleted, asUnavailable(err)
}

// asUnavailable is jobdb.AsUnavailable: err, a failure of the job
// database, marked claimcheck.ErrUnavailable unless classified already.
func asUnavailable(err error) error { return jobdb.AsUnavailable(err) }

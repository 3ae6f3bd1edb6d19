// Package checkin is package pipeline's check-ins: the check-in intent
// committed to the job database before a payload or result is stored
// (Intents.CheckIn, CheckInResult, CheckInManifest), its turning into a
// registry row (Anchor) and the one way an object is deleted
// (DeleteUnheld, see internal/claimregistry); the key records
// (docs/invariants.md, "keys": RecordStoreKey, RecordTicketKey,
// RecordedKeyIDs); and the job database's identity and the store
// namespaces it owns (DatabaseID, ClaimNamespace, CheckStores). Package
// pipeline keeps the public names and forwards to it.
package checkin

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/claimregistry"
	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
)

// Intents checks payloads and results in with their check-in intents on
// the job database DB.
type Intents struct {
	DB      *sql.DB
	Dialect dbopen.Dialect
	Logger  *slog.Logger
	// StoreFor is the store holding a ticket's object (the pipeline's
	// storeFor).
	StoreFor func(*claimcheck.Ticket) (*claimcheck.Store, error)
	keys     sync.Map // key ids this process recorded in claimcheck_key (recordKey)
}

// CheckIn checks r in for tenant to st after committing a check-in intent
// for the object's key (Pipeline.CheckIn, which documents it), the store's
// key recorded first.
func (c *Intents) CheckIn(ctx context.Context, st *claimcheck.Store, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
	if err := c.RecordStoreKey(ctx, st); err != nil {
		return nil, err
	}
	return c.checkInWith(ctx, opts, false, func(o *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
		return st.CheckIn(ctx, tenant, r, o)
	})
}

// CheckInResult checks a handler's result in to st as CheckIn does,
// except that should the job database be unavailable for its check-in
// intent, the result is checked in without it rather than the handler's
// work lost: the sweeper's grace period (at least an hour) keeps the
// object, the caller keeps an outcome record naming it, and the result's
// registry row, once the database is back, finds the object (Anchor).
// The store's key must be recorded first (a process that recorded it asks
// the database nothing), so nothing is sealed under a key the job database
// does not know (docs/invariants.md, invariant 9). Used by the worker's
// finish and the broker inbox alike (invariant 12).
func (c *Intents) CheckInResult(ctx context.Context, st *claimcheck.Store, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
	if err := c.RecordStoreKey(ctx, st); err != nil {
		return nil, err
	}
	return c.checkInWith(ctx, opts, true, func(o *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
		return st.CheckIn(ctx, tenant, r, o)
	})
}

// CheckInManifest checks manifest m in to st as CheckIn checks a payload
// in (Pipeline.CheckInManifest).
func (c *Intents) CheckInManifest(ctx context.Context, st *claimcheck.Store, tenant string, m *claimcheck.Manifest) (*claimcheck.Ticket, error) {
	if err := c.RecordStoreKey(ctx, st); err != nil {
		return nil, err
	}
	return c.checkInWith(ctx, nil, false, func(o *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
		return st.CheckInManifest(ctx, tenant, m, o)
	})
}

// checkInWith runs checkIn (a store check-in) with opts and a BeforeStore
// hook that commits the check-in intent first. withoutIntent: an intent
// the database cannot record is logged and the check-in goes on without
// it (a handler's result, CheckInResult); otherwise it fails the
// check-in with claimcheck.ErrUnavailable.
func (c *Intents) checkInWith(ctx context.Context, opts *claimcheck.CheckInOptions, withoutIntent bool, checkIn func(*claimcheck.CheckInOptions) (*claimcheck.Ticket, error)) (*claimcheck.Ticket, error) {
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
		if err := claimregistry.RecordIntent(ctx, c.DB, c.Dialect, t.Key, t.Tenant, t.Created.UnixNano()); err != nil {
			if withoutIntent {
				c.Logger.WarnContext(ctx, "pipeline: a result checked in without its check-in intent (the job database is unavailable): its outcome record keeps it", "tenant", t.Tenant, "error", err.Error())
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
		c.DropIntent(ctx, t)
	}
	return t, err
}

// DropIntent removes t's intent, if any, best effort: one left behind only
// keeps the object until a sweep past its grace period.
func (c *Intents) DropIntent(ctx context.Context, t *claimcheck.Ticket) {
	if t == nil || t.IsInline() {
		return
	}
	_, _ = claimregistry.DropIntent(context.WithoutCancel(ctx), c.DB, t.Key, t.Created.UnixNano())
}

// Anchor is the guard against committing a registry row whose object is
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
func (c *Intents) Anchor(ctx context.Context, tx *sql.Tx, t *claimcheck.Ticket, step string) error {
	if t.IsInline() {
		return nil
	}
	if err := claimregistry.Lock(ctx, tx, c.Dialect, t.Key); err != nil {
		return fmt.Errorf("pipeline: %s %s: %w", step, t, err)
	}
	had, err := claimregistry.DropIntent(ctx, tx, t.Key, t.Created.UnixNano())
	if err != nil {
		return fmt.Errorf("pipeline: %s %s: %w", step, t, err)
	}
	if had {
		return nil
	}
	st, err := c.StoreFor(t)
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

// Discard deletes the object t's check-in stored (or reused) for a job
// that was not written, unless a registry row or another check-in intent
// holds it; t's own intent goes with it.
func (c *Intents) Discard(ctx context.Context, t *claimcheck.Ticket) error {
	_, err := c.DeleteUnheld(context.WithoutCancel(ctx), t, func(tx *sql.Tx) error {
		_, err := claimregistry.DropIntent(ctx, tx, t.Key, t.Created.UnixNano())
		return err
	})
	return err
}

// DeleteUnheld is the one way the pipeline deletes an object: in a
// transaction holding the key's lock, it runs release (which removes the
// caller's own hold: a registry row or an intent), then deletes the object
// from the store if no registry row and no check-in intent is left,
// committing after the store's delete (a failed delete rolls release back).
// It reports whether the object was deleted.
func (c *Intents) DeleteUnheld(ctx context.Context, t *claimcheck.Ticket, release func(*sql.Tx) error) (bool, error) {
	if t == nil || t.IsInline() {
		return false, nil
	}
	st, err := c.StoreFor(t)
	if err != nil {
		return false, err
	}
	deleted := false
	err = claimregistry.InTx(ctx, c.DB, func(tx *sql.Tx) error {
		if err := claimregistry.Lock(ctx, tx, c.Dialect, t.Key); err != nil {
			return err
		}
		if err := release(tx); err != nil {
			return err
		}
		rows, intents, err := claimregistry.Holders(ctx, tx, t.Key)
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
	return deleted, jobdb.AsUnavailable(err)
}

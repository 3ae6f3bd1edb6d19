package pipeline

// The check-ins with their intents; pipeline/internal/checkin holds them.

import (
	"context"
	"io"

	"github.com/claimcheck/claimcheck"
)

// CheckIn checks r in for tenant as Store().CheckIn does, after committing
// a check-in intent for the object's key to the job database (once the
// payload is read and its key known, before anything is written at the key
// or an object already there is reused). While the intent is live no sweep
// deletes the object, whatever the clocks; EnqueueTx turns it into the
// registry row. Check-ins that reuse an object serialise with deletions of
// it (see internal/claimregistry), so a reused object exists when CheckIn
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
	return p.ci.CheckIn(ctx, p.store, tenant, r, opts)
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
	return p.ci.CheckIn(ctx, st, tenant, r, opts)
}

// CheckInManifest checks a manifest in for tenant as CheckIn checks a
// payload in (its intent committed first), with Store().CheckInManifest:
// check each document m lists in with CheckIn first. EnqueueTx turns the
// intents of the manifest and of its documents into registry rows.
//
// Errors: Store.CheckInManifest's; the database's, as CheckIn.
func (p *Pipeline) CheckInManifest(ctx context.Context, tenant string, m *claimcheck.Manifest) (*claimcheck.Ticket, error) {
	return p.ci.CheckInManifest(ctx, p.store, tenant, m)
}

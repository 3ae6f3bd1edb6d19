package pipeline

import (
	"context"

	"github.com/claimcheck/claimcheck/pipeline/internal/checkin"
)

// DatabaseID is the job database's identity: random, made when the
// database is first opened, recorded in its claimcheck_meta table and in
// the ownership marker of every store namespace it owns.
func (p *Pipeline) DatabaseID() string { return p.dbID }

// NamespaceUnchecked lists the stores (location and reason) whose
// namespace owner a read-only Open (Config.ReadOnly) could not check
// because the store was unavailable; nil when every one was checked. A
// command says so, and reads the job database all the same.
func (p *Pipeline) NamespaceUnchecked() []string { return p.unchecked }

// ErrNamespaceLost is returned (wrapped) by CheckStores for a store whose
// namespace this job database owns but whose ownership marker
// (claimcheck.NamespaceMarkerKey) is gone: the store's directory, bucket
// or namespace was removed or replaced since.
var ErrNamespaceLost = checkin.ErrNamespaceLost

// CheckStores checks, for a readiness probe, every store of the pipeline:
// that it answers (claimcheck.Store.CheckBucket, reading only: a file://
// store's root directory must be there) and, when the job database
// records owning the store's namespace, that the namespace's ownership
// marker is still there and names this job database. A missing marker is
// no error at start-up, where Open writes it, but is one once the
// namespace was claimed: the objects the claims registry refers to went
// with it.
//
// Errors, one per failing store (errors.Join), each naming the store: the
// store's (ErrUnavailable, ErrAccessDenied, ...); ErrNamespaceLost;
// claimcheck.ErrNamespaceOwned when the marker names another job
// database; the job database's, wrapped.
func (p *Pipeline) CheckStores(ctx context.Context) error {
	return checkin.CheckStores(ctx, p.db, p.dbID, p.Stores())
}

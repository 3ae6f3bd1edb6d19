package checkin

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/claimcheck/claimcheck"
)

// metaDatabaseID names the claimcheck_meta row holding the job database's
// identity; metaNamespace+location the rows of the namespaces it owns.
const (
	metaDatabaseID = "database_id"
	metaNamespace  = "namespace:"
)

// DatabaseID returns the job database's identity (16 random bytes, hex),
// making it on first use. Two processes making it at once agree: the
// first insert wins and both read it back.
func DatabaseID(ctx context.Context, db *sql.DB, create bool) (string, error) {
	var id string
	err := db.QueryRowContext(ctx, `SELECT value FROM claimcheck_meta WHERE name = $1`, metaDatabaseID).Scan(&id)
	if err == nil || !errors.Is(err, sql.ErrNoRows) || !create {
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("pipeline: read the job database's identity: %w", err)
		}
		return id, nil
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	if _, err := db.ExecContext(ctx, `INSERT INTO claimcheck_meta (name, value) VALUES ($1, $2) ON CONFLICT DO NOTHING`, metaDatabaseID, hex.EncodeToString(b)); err != nil {
		return "", fmt.Errorf("pipeline: record the job database's identity: %w", err)
	}
	return DatabaseID(ctx, db, false)
}

// ClaimNamespace makes sure the job database db (identity dbID, named
// database in messages) owns store's namespace
// before anything reads or deletes objects in it: it writes the marker on
// first use (unless readOnly), records the namespace in the database, and
// refuses a namespace whose marker names another database.
//
// A read-only claim of a store that is unavailable returns, instead of an
// error, unchecked: the store's location and the reason, for
// Pipeline.NamespaceUnchecked.
//
// Errors: claimcheck.ErrNamespaceOwned with claimcheck.ErrConfig, naming
// both databases; the store's and the database's errors, wrapped.
func ClaimNamespace(ctx context.Context, db *sql.DB, logger *slog.Logger, dbID string, store *claimcheck.Store, database string, readOnly bool) (unchecked string, err error) {
	var owner *claimcheck.NamespaceOwner
	if readOnly {
		owner, err = store.NamespaceOwner(ctx)
	} else {
		owner, err = store.ClaimNamespace(ctx, claimcheck.NamespaceOwner{DatabaseID: dbID, Database: database})
	}
	if err != nil && readOnly && claimcheck.Classify(err) == claimcheck.FailureUnavailable {
		// A read-only open only reads the job database: a store that is
		// down (or refuses, or whose keeper fails) must not keep an
		// operator from seeing the jobs that wait for it. Nothing is
		// written or deleted in the namespace, so its owner can wait.
		logger.WarnContext(ctx, "pipeline: read-only open: the store namespace's owner is not checked, the store is unavailable", "store", store.Location(), "error", err.Error())
		return fmt.Sprintf("%s (%s)", store.Location(), claimcheck.Reason(err)), nil
	}
	if err != nil {
		return "", fmt.Errorf("pipeline: check which job database owns store namespace %s: %w", store.Location(), err)
	}
	if owner == nil {
		return "", nil // read-only, and nothing claimed the namespace yet
	}
	if owner.DatabaseID != dbID {
		return "", fmt.Errorf("pipeline: store namespace %s belongs to job database %s (id %s, since %s), not to this job database %s (id %s): "+
			"give each job database its own namespace (prefix=NAME/ in the store URL) or its own bucket, or use the owning database: %w: %w",
			store.Location(), owner.Database, owner.DatabaseID, owner.Created.Format(time.RFC3339), database, dbID,
			claimcheck.ErrNamespaceOwned, claimcheck.ErrConfig)
	}
	if readOnly {
		return "", nil
	}
	_, err = db.ExecContext(ctx, `INSERT INTO claimcheck_meta (name, value) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		metaNamespace+store.Location(), owner.Created.Format(time.RFC3339Nano))
	if err != nil {
		return "", fmt.Errorf("pipeline: record store namespace %s in the job database: %w", store.Location(), err)
	}
	return "", nil
}

// ErrNamespaceLost is returned (wrapped) by CheckStores for a store whose
// namespace this job database owns but whose ownership marker
// (claimcheck.NamespaceMarkerKey) is gone: the store's directory, bucket
// or namespace was removed or replaced since.
var ErrNamespaceLost = errors.New("namespace marker gone")

// CheckStores checks stores for a readiness probe against the namespaces
// the job database db (identity dbID) owns (Pipeline.CheckStores
// documents it).
func CheckStores(ctx context.Context, db *sql.DB, dbID string, stores []*claimcheck.Store) error {
	var errs []error
	for _, st := range stores {
		if err := st.CheckBucket(ctx, false); err != nil {
			errs = append(errs, err)
			continue
		}
		var created string
		err := db.QueryRowContext(ctx, `SELECT value FROM claimcheck_meta WHERE name = $1`, metaNamespace+st.Location()).Scan(&created)
		if errors.Is(err, sql.ErrNoRows) {
			continue // not claimed by this job database (a read-only open of a fresh one)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("pipeline: store %s: read which namespaces the job database owns: %w", st.Location(), err))
			continue
		}
		owner, err := st.NamespaceOwner(ctx)
		switch {
		case err != nil:
			errs = append(errs, err)
		case owner == nil:
			errs = append(errs, fmt.Errorf("pipeline: store %s: the namespace marker %s is gone, written %s for this job database: the store's directory, bucket or namespace was removed or replaced: %w",
				st.Location(), claimcheck.NamespaceMarkerKey, created, ErrNamespaceLost))
		case owner.DatabaseID != dbID:
			errs = append(errs, fmt.Errorf("pipeline: store %s: the namespace marker names job database %s (id %s), not this one (id %s): %w",
				st.Location(), owner.Database, owner.DatabaseID, dbID, claimcheck.ErrNamespaceOwned))
		}
	}
	return errors.Join(errs...)
}

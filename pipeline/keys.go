package pipeline

import (
	"context"
	"database/sql"

	"github.com/claimcheck/claimcheck/pipeline/internal/checkin"
)

// RecordedKeyIDs returns the ids of the key-encryption keys that sealed a
// payload or result recorded in the job database db (opened with
// dbopen.Open or as Pipeline.DB), oldest first, "(unrecorded)" standing
// for sealed data whose key id is unknown. A database not migrated yet
// (no claimcheck_key table) is read as the migration would fill it:
// "(unrecorded)" when River's job table holds a job with a sealed inline
// payload or result, else nothing; a database without River's table holds
// nothing. It only reads.
//
// Errors: the database's, wrapped; never a nil error for a database that
// could not be read.
func RecordedKeyIDs(ctx context.Context, db *sql.DB) ([]string, error) {
	return checkin.RecordedKeyIDs(ctx, db)
}

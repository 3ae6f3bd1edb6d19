package jobdb

// UnrecordedKeyID is the id recorded in claimcheck_key for sealed data
// whose key id is not known: jobs sealed before keys were recorded (the
// migration's backfill), or a keeper given no id (claimcheck.KeyIDText of
// "").
const UnrecordedKeyID = "(unrecorded)"

// SealedJobsSQLite and SealedJobsPG select the jobs of river_job whose
// arguments (an inline ticket) or output (an inline result ticket) carry a
// wrapped data key ("dek", docs/ticket.md). River's SQLite driver stores
// args and metadata as SQLite's binary JSON (jsonb), which json_extract
// reads; on PostgreSQL they are jsonb columns.
const (
	SealedJobsSQLite = `json_extract(args, '$.ticket.dek') IS NOT NULL OR json_extract(metadata, '$.output.result.dek') IS NOT NULL`
	SealedJobsPG     = `args->'ticket'->>'dek' IS NOT NULL OR metadata->'output'->'result'->>'dek' IS NOT NULL`
)

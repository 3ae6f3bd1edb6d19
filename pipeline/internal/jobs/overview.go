package jobs

// What a console or a metrics exporter reads about a pipeline without
// touching a payload: the outbox per destination, the storage the claims
// registry records per tenant, River's client for River UI, and the job
// arguments and metadata with tickets redacted.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
)

// RiverClient is Pipeline.RiverClient (package pipeline documents it).
func (p *Jobs) RiverClient() *river.Client[*sql.Tx] { return p.tools }

// RegisterQueuesEvery is how often RegisterQueues looks for queues at
// most; a call sooner after the last does nothing.
const RegisterQueuesEvery = 10 * time.Second

// RegisterQueues is Pipeline.RegisterQueues (package pipeline documents it).
func (p *Jobs) RegisterQueues(ctx context.Context) (int64, error) {
	now, last := time.Now().UnixNano(), p.lastQueues.Load()
	if now-last < int64(RegisterQueuesEvery) || !p.lastQueues.CompareAndSwap(last, now) {
		return 0, nil
	}
	res, err := p.db.ExecContext(ctx, `INSERT INTO river_queue (name, created_at, updated_at)
		SELECT DISTINCT queue, `+p.dbNow()+`, `+p.dbNow()+` FROM river_job
		WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled') AND queue NOT IN (SELECT name FROM river_queue)
		ON CONFLICT (name) DO NOTHING`)
	if err != nil {
		p.lastQueues.Store(0) // the next call tries again
		return 0, fmt.Errorf("pipeline: register queues in river_queue: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// OutboxStats is one outbox destination's queue.
type OutboxStats struct {
	Destination string `json:"destination"`
	// Depth is the number of entries not yet confirmed by the broker
	// (available, running, retryable or scheduled).
	Depth int64 `json:"depth"`
	// Oldest is when the oldest of those entries was enqueued; zero when
	// Depth is 0.
	Oldest time.Time `json:"oldest,omitzero"`
	// Sent is the number of entries the broker confirmed (still in the job
	// table: River prunes completed jobs after a day by default).
	Sent int64 `json:"sent"`
	// Dead is the number of entries the relay gave up on (cancelled or
	// discarded).
	Dead int64 `json:"dead"`
}

// OutboxStats is Pipeline.OutboxStats (package pipeline documents it).
func (p *Jobs) OutboxStats(ctx context.Context) ([]OutboxStats, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT queue,
		SUM(CASE WHEN state IN ('available', 'running', 'retryable', 'scheduled') THEN 1 ELSE 0 END),
		MIN(CASE WHEN state IN ('available', 'running', 'retryable', 'scheduled') THEN id END),
		SUM(CASE WHEN state = 'completed' THEN 1 ELSE 0 END),
		SUM(CASE WHEN state IN ('cancelled', 'discarded') THEN 1 ELSE 0 END)
		FROM river_job WHERE kind IN (queue, $1) AND queue LIKE $2 GROUP BY queue ORDER BY queue`, LegacyRiverKind, OutboxQueuePrefix+"%")
	if err != nil {
		return nil, fmt.Errorf("pipeline: count outbox entries: %w", err)
	}
	var out []OutboxStats
	var oldest []sql.NullInt64
	for rows.Next() {
		var s OutboxStats
		var queue string
		var first sql.NullInt64
		if err := rows.Scan(&queue, &s.Depth, &first, &s.Sent, &s.Dead); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pipeline: count outbox entries: %w", err)
		}
		s.Destination, _ = IsOutboxQueue(queue)
		out = append(out, s)
		oldest = append(oldest, first)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("pipeline: count outbox entries: %w", err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pipeline: count outbox entries: %w", err)
	}
	for i, id := range oldest {
		if !id.Valid {
			continue
		}
		row, err := p.client.JobGet(ctx, id.Int64)
		if err != nil {
			continue // sent or deleted since the count: no age to show
		}
		out[i].Oldest = row.CreatedAt
	}
	return out, nil
}

// TenantStorage is what the claims registry records for one tenant and
// role: the distinct objects jobs refer to and their payload bytes.
type TenantStorage struct {
	Tenant string `json:"tenant"`
	// Role is "payload" or "result".
	Role    string `json:"role"`
	Objects int64  `json:"objects"`
	// Bytes is the sum of the objects' payload sizes (plaintext bytes; a
	// sealed object is larger by its encryption overhead).
	Bytes int64 `json:"bytes"`
}

// StorageByTenant is Pipeline.StorageByTenant (package pipeline documents it).
func (p *Jobs) StorageByTenant(ctx context.Context) ([]TenantStorage, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT tenant, role, COUNT(*), COALESCE(SUM(size), 0)
		FROM (SELECT DISTINCT tenant, role, object_key, size FROM claimcheck_claim) objects
		GROUP BY tenant, role ORDER BY tenant, role`)
	if err != nil {
		return nil, fmt.Errorf("pipeline: sum the claims registry: %w", err)
	}
	defer rows.Close()
	var out []TenantStorage
	for rows.Next() {
		var s TenantStorage
		if err := rows.Scan(&s.Tenant, &s.Role, &s.Objects, &s.Bytes); err != nil {
			return nil, fmt.Errorf("pipeline: sum the claims registry: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pipeline: sum the claims registry: %w", err)
	}
	return out, nil
}

// RedactedTicket is a ticket as a page may show it: no key beyond the
// tenant's prefix, no payload bytes, no wrapped key, no signature.
type RedactedTicket struct {
	Tenant string `json:"tenant"`
	Store  string `json:"store,omitempty"`
	// Key is Ticket.RedactedKey: "payloads/acme/…"; empty when inline.
	Key string `json:"key,omitempty"`
	// SHA256 is the digest's first 12 hex characters.
	SHA256      string    `json:"sha256_prefix"`
	Size        int64     `json:"size"`
	ContentType string    `json:"type,omitempty"`
	Created     time.Time `json:"created"`
	// Placement is "inline" or "offloaded".
	Placement string `json:"placement"`
	Encrypted bool   `json:"encrypted,omitempty"`
	// KID is the id of the key-encryption key that wrapped an inline
	// payload's data key (Ticket.KID; an offloaded payload's is in its
	// object's metadata): an id, never key material.
	KID    string `json:"kid,omitempty"`
	Signed bool   `json:"signed,omitempty"`
}

// Redact returns t as a page may show it.
func Redact(t *claimcheck.Ticket) *RedactedTicket {
	r := &RedactedTicket{Tenant: t.Tenant, Store: t.Store, Key: t.RedactedKey(), SHA256: t.DigestPrefix(), Size: t.Size,
		ContentType: t.ContentType, Created: t.Created, Placement: placement(t), Encrypted: t.DEK != "", KID: t.KID, Signed: t.Sig != ""}
	return r
}

func placement(t *claimcheck.Ticket) string {
	if t.IsInline() {
		return "inline"
	}
	return "offloaded"
}

// redactedUnknown replaces what RedactArgs and RedactMetadata cannot read:
// nothing of it is shown.
var redactedUnknown = json.RawMessage(`{"redacted":"not a claimcheck ticket"}`)

// RedactArgs returns a job's encoded River arguments with the ticket
// replaced by its RedactedTicket, for River UI and other pages that show
// arguments. Arguments that are not a claimcheck job's, or whose ticket does
// not parse, are replaced whole: nothing unread is shown.
func RedactArgs(encoded []byte) json.RawMessage {
	var args Args
	if err := json.Unmarshal(encoded, &args); err != nil || args.Ticket == nil {
		return redactedUnknown
	}
	t, err := claimcheck.ParseTicket(CompactJSON(args.Ticket))
	if err != nil {
		return redactedUnknown
	}
	out, err := json.Marshal(struct {
		Kind           string          `json:"kind"`
		Tenant         string          `json:"tenant"`
		IdempotencyKey string          `json:"idempotency_key,omitempty"`
		Destination    string          `json:"destination,omitempty"`
		Ticket         *RedactedTicket `json:"ticket"`
	}{args.JobKind, args.Tenant, args.IdempotencyKey, args.Destination, Redact(t)})
	if err != nil {
		return redactedUnknown
	}
	return out
}

// RedactMetadata returns a job's River metadata with the result ticket in
// River's recorded output (Output) replaced by its RedactedTicket. The
// other keys (trace context, the outbox entry's broker binding, which holds
// no credentials) are kept. Metadata that does not parse as a JSON object is
// replaced whole.
func RedactMetadata(metadata []byte) json.RawMessage {
	if len(metadata) == 0 {
		return json.RawMessage(`{}`)
	}
	var md map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &md); err != nil {
		return redactedUnknown
	}
	if raw, ok := md["output"]; ok {
		var o Output
		if err := json.Unmarshal(raw, &o); err != nil {
			md["output"] = redactedUnknown
		} else {
			red := map[string]any{}
			if !o.UnavailableSince.IsZero() {
				red["unavailable_since"] = o.UnavailableSince
			}
			if len(o.Result) > 0 {
				if t, err := claimcheck.ParseTicket(CompactJSON(o.Result)); err == nil {
					red["result"] = Redact(t)
				} else {
					red["result"] = redactedUnknown
				}
			}
			b, _ := json.Marshal(red)
			md["output"] = b
		}
	}
	out, err := json.Marshal(md)
	if err != nil {
		return redactedUnknown
	}
	return out
}

// Package apiauth holds the API tokens of `claimcheck serve`: per-tenant
// bearer tokens, stored hashed in the job database's claimcheck_token
// table (a claims-registry migration step,
// pipeline/internal/jobdb/migrate.go), each allowed only the tenants it was
// created for.
//
// A token is "cct_" followed by 32 random bytes in unpadded base64url (47
// characters). Only its SHA-256 is stored: a copy of the database gives no
// usable token, and a token is shown once, when it is created. Because the
// token is 256 bits of randomness, an unsalted SHA-256 is enough (no slow
// password hash is needed: there is nothing to guess).
//
// A token is either for a list of tenants or for all of them (AllTenants,
// `tokens create --all-tenants`); only an all-tenants token opens the web
// console, which shows every tenant's jobs.
package apiauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/claimcheck/claimcheck"
)

// TokenPrefix starts every token, so a leaked one is recognisable (secret
// scanners) and a token is never mistaken for another secret.
const TokenPrefix = "cct_"

// AllTenants, as a token's only tenant, allows every tenant.
const AllTenants = "*"

// MaxNameLen is the longest token name, in bytes.
const MaxNameLen = 64

// MaxTenants is the most tenants one token may be allowed.
const MaxTenants = 64

// ErrTokenRefused is returned by Verify for a token that is malformed,
// unknown or revoked; which of these is not said.
var ErrTokenRefused = errors.New("token refused: unknown or revoked")

// ErrTokenNotFound is returned by Revoke for an id no live token has.
var ErrTokenNotFound = errors.New("no such token")

// Token is a stored token's description; it never holds the token itself.
type Token struct {
	// ID names the token for list and revoke: 12 hex digits.
	ID string `json:"id"`
	// Name is the operator's label, possibly empty.
	Name string `json:"name"`
	// Tenants are the tenants the token may act on; [AllTenants] for all.
	Tenants []string `json:"tenants"`
	// Created is when the token was made (UTC).
	Created time.Time `json:"created"`
	// Revoked is when it was revoked, nil while it is live.
	Revoked *time.Time `json:"revoked,omitempty"`
}

// Allows reports whether the token may act on tenant.
func (t *Token) Allows(tenant string) bool {
	return t.All() || slices.Contains(t.Tenants, tenant)
}

// All reports whether the token allows every tenant.
func (t *Token) All() bool { return slices.Contains(t.Tenants, AllTenants) }

// Store keeps tokens in a job database's claimcheck_token table
// (pipeline.Open migrates it).
type Store struct {
	db  *sql.DB
	now func() time.Time
}

// New returns the token store of the job database db (pipeline.Pipeline.DB).
func New(db *sql.DB) *Store { return &Store{db: db, now: time.Now} }

// ValidateTenants checks a token's tenants: 1 to MaxTenants tenant
// identifiers (claimcheck.ValidateTenant), no repeats, or AllTenants alone.
func ValidateTenants(tenants []string) error {
	if len(tenants) == 0 {
		return errors.New("a token needs at least one tenant (or all tenants)")
	}
	if len(tenants) > MaxTenants {
		return fmt.Errorf("%d tenants, at most %d per token", len(tenants), MaxTenants)
	}
	if slices.Contains(tenants, AllTenants) {
		if len(tenants) > 1 {
			return errors.New("a token for all tenants names no other tenant")
		}
		return nil
	}
	seen := map[string]bool{}
	for _, t := range tenants {
		if err := claimcheck.ValidateTenant(t); err != nil {
			return fmt.Errorf("tenant %q: %w", t, err)
		}
		if seen[t] {
			return fmt.Errorf("tenant %q given twice", t)
		}
		seen[t] = true
	}
	return nil
}

// ValidateName checks a token's name: at most MaxNameLen printable ASCII
// bytes.
func ValidateName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("name is %d bytes, at most %d", len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] > 0x7e {
			return fmt.Errorf("name has a non-printable or non-ASCII byte at %d", i)
		}
	}
	return nil
}

// Create makes a token for tenants, stores its hash, and returns the token
// (shown once: it cannot be read back) with its description. Errors: a
// plain error for invalid tenants or name (ValidateTenants, ValidateName);
// the database's, wrapped.
func (s *Store) Create(ctx context.Context, name string, tenants []string) (string, *Token, error) {
	if err := ValidateTenants(tenants); err != nil {
		return "", nil, err
	}
	if err := ValidateName(name); err != nil {
		return "", nil, err
	}
	var secret [32]byte
	var id [6]byte
	rand.Read(secret[:])
	rand.Read(id[:])
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	t := &Token{ID: hex.EncodeToString(id[:]), Name: name, Tenants: slices.Clone(tenants), Created: s.now().UTC().Truncate(time.Millisecond)}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO claimcheck_token (id, name, token_sha256, tenants, created_ms, revoked_ms) VALUES ($1, $2, $3, $4, $5, NULL)`,
		t.ID, t.Name, hashToken(token), strings.Join(t.Tenants, ","), t.Created.UnixMilli()); err != nil {
		return "", nil, fmt.Errorf("apiauth: store the token: %w", err)
	}
	return token, t, nil
}

// hashToken is the stored form of a token: hex SHA-256.
func hashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// wellFormed reports whether s has a token's shape.
func wellFormed(s string) bool {
	if !strings.HasPrefix(s, TokenPrefix) || len(s) != len(TokenPrefix)+43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s[len(TokenPrefix):])
	return err == nil
}

// Verify returns the live token token is. Errors: ErrTokenRefused for a
// malformed, unknown or revoked token (the database is not asked about a
// malformed one); the database's errors, wrapped. The token is looked up by
// its hash, so no comparison of secrets takes place.
func (s *Store) Verify(ctx context.Context, token string) (*Token, error) {
	if !wellFormed(token) {
		return nil, ErrTokenRefused
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, tenants, created_ms, revoked_ms FROM claimcheck_token WHERE token_sha256 = $1 AND revoked_ms IS NULL`, hashToken(token))
	if err != nil {
		return nil, fmt.Errorf("apiauth: look the token up: %w", err)
	}
	ts, err := scan(rows)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, ErrTokenRefused
	}
	return &ts[0], nil
}

// Configured reports whether any live token exists: without one, serve's
// API answers loopback peers only.
func (s *Store) Configured(ctx context.Context) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM claimcheck_token WHERE revoked_ms IS NULL`).Scan(&n); err != nil {
		return false, fmt.Errorf("apiauth: count tokens: %w", err)
	}
	return n > 0, nil
}

// List returns every token, live and revoked, oldest first.
func (s *Store) List(ctx context.Context) ([]Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, tenants, created_ms, revoked_ms FROM claimcheck_token ORDER BY created_ms, id`)
	if err != nil {
		return nil, fmt.Errorf("apiauth: list tokens: %w", err)
	}
	return scan(rows)
}

// Revoke revokes the live token with id: from then on Verify refuses it.
// Errors: ErrTokenNotFound when no live token has id; the database's,
// wrapped.
func (s *Store) Revoke(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE claimcheck_token SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL`, s.now().UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("apiauth: revoke token %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("apiauth: revoke token %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("apiauth: revoke token %q: %w", id, ErrTokenNotFound)
	}
	return nil
}

func scan(rows *sql.Rows) ([]Token, error) {
	defer rows.Close()
	out := []Token{}
	for rows.Next() {
		var t Token
		var tenants string
		var created int64
		var revoked sql.NullInt64
		if err := rows.Scan(&t.ID, &t.Name, &tenants, &created, &revoked); err != nil {
			return nil, fmt.Errorf("apiauth: read tokens: %w", err)
		}
		t.Tenants = strings.Split(tenants, ",")
		t.Created = time.UnixMilli(created).UTC()
		if revoked.Valid {
			r := time.UnixMilli(revoked.Int64).UTC()
			t.Revoked = &r
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("apiauth: read tokens: %w", err)
	}
	return out, nil
}

package apiauth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/apiauth"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/pipeline"
)

// openPipeline opens a migrated job database (and so its claimcheck_token
// table) on database.
func openPipeline(t *testing.T, database string) *pipeline.Pipeline {
	t.Helper()
	ctx := context.Background()
	store, err := claimcheck.OpenStore(ctx, "mem://", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p, err := pipeline.Open(ctx, pipeline.Config{Database: database, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestTokensSQLite(t *testing.T) {
	t.Parallel()
	testTokens(t, dbtest.SQLite(t))
}

func TestTokensPostgres(t *testing.T) {
	t.Parallel()
	testTokens(t, dbtest.Postgres(t))
}

func testTokens(t *testing.T, database string) {
	ctx := context.Background()
	p := openPipeline(t, database)
	s := apiauth.New(p.DB())

	if ok, err := s.Configured(ctx); err != nil || ok {
		t.Fatalf("Configured on a fresh database = %v, %v; want false", ok, err)
	}
	acme, ta, err := s.Create(ctx, "acme producer", []string{"acme"})
	if err != nil {
		t.Fatal(err)
	}
	both, _, err := s.Create(ctx, "", []string{"acme", "globex"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(acme, apiauth.TokenPrefix) || len(acme) != 47 || acme == both {
		t.Fatalf("tokens %q, %q: want distinct cct_ tokens of 47 characters", acme, both)
	}
	if ok, err := s.Configured(ctx); err != nil || !ok {
		t.Fatalf("Configured = %v, %v; want true", ok, err)
	}

	// The database holds the token's SHA-256, never the token.
	var rows int
	if err := p.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM claimcheck_token WHERE token_sha256 = $1 OR name = $1 OR tenants = $1 OR id = $1`, acme).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatal("the token itself is stored in claimcheck_token")
	}

	got, err := s.Verify(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != ta.ID || got.Name != "acme producer" || !got.Allows("acme") || got.Allows("globex") || got.All() {
		t.Fatalf("Verify(acme) = %+v: want the acme token, allowing acme only", got)
	}
	if g, err := s.Verify(ctx, both); err != nil || !g.Allows("globex") || !g.Allows("acme") || g.Allows("initech") {
		t.Fatalf("Verify(both) = %+v, %v", g, err)
	}
	for name, bad := range map[string]string{
		"empty": "", "no prefix": acme[len(apiauth.TokenPrefix):], "one changed": acme[:len(acme)-1] + flip(acme[len(acme)-1]),
		"truncated": acme[:40], "not base64": apiauth.TokenPrefix + strings.Repeat("!", 43),
	} {
		if _, err := s.Verify(ctx, bad); !errors.Is(err, apiauth.ErrTokenRefused) {
			t.Errorf("Verify(%s) = %v, want ErrTokenRefused", name, err)
		}
	}

	if err := s.Revoke(ctx, ta.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, acme); !errors.Is(err, apiauth.ErrTokenRefused) {
		t.Fatalf("Verify after Revoke = %v, want ErrTokenRefused", err)
	}
	if err := s.Revoke(ctx, ta.ID); !errors.Is(err, apiauth.ErrTokenNotFound) {
		t.Fatalf("second Revoke = %v, want ErrTokenNotFound", err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Revoked == nil && list[1].Revoked == nil {
		t.Fatalf("List = %+v: want two tokens, one revoked", list)
	}
	all, _, err := s.Create(ctx, "ops", []string{apiauth.AllTenants})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := s.Verify(ctx, all); err != nil || !g.All() || !g.Allows("anyone") {
		t.Fatalf("Verify(all) = %+v, %v", g, err)
	}
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func TestValidateTenants(t *testing.T) {
	t.Parallel()
	for _, bad := range [][]string{nil, {}, {"Acme"}, {"acme", "acme"}, {"*", "acme"}, {""}} {
		if err := apiauth.ValidateTenants(bad); err == nil {
			t.Errorf("ValidateTenants(%q) = nil, want an error", bad)
		}
	}
	for _, good := range [][]string{{"acme"}, {"acme", "globex"}, {"*"}} {
		if err := apiauth.ValidateTenants(good); err != nil {
			t.Errorf("ValidateTenants(%q) = %v", good, err)
		}
	}
	if err := apiauth.ValidateName("bad\nname"); err == nil {
		t.Error("ValidateName accepted a newline")
	}
}

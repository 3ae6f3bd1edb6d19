package cli

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck/internal/apiauth"
)

// TestTokensCommands makes, lists and revokes tokens through the command,
// and checks the console's gate accepts only a live all-tenants token.
func TestTokensCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if r := b.run("", "tokens", "create"); r.code != 2 {
		t.Fatalf("tokens create without a tenant: exit %d, want 2", r.code)
	}
	if r := b.run("", "tokens", "create", "--tenant", "acme", "--all-tenants"); r.code != 2 {
		t.Fatalf("tokens create --tenant --all-tenants: exit %d, want 2", r.code)
	}
	if r := b.run("", "tokens", "revoke", "cct_notanid"); r.code != 2 {
		t.Fatalf("tokens revoke of a non-id: exit %d, want 2", r.code)
	}
	acme := strings.TrimSpace(b.ok("tokens", "create", "--tenant", "acme", "--name", "acme app"))
	var ops struct {
		Token   string   `json:"token"`
		ID      string   `json:"id"`
		Tenants []string `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(b.ok("--json", "tokens", "create", "--all-tenants")), &ops); err != nil {
		t.Fatal(err)
	}
	list := b.ok("tokens", "list")
	if strings.Contains(list, acme) || strings.Contains(list, ops.Token) {
		t.Fatalf("tokens list shows a token:\n%s", list)
	}
	if !strings.Contains(list, "acme app") || !strings.Contains(list, "all tenants") || !strings.Contains(list, ops.ID) {
		t.Fatalf("tokens list:\n%s", list)
	}

	db, err := sql.Open("sqlite", filepath.Join(b.data, "claimcheck.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	gate := consoleGate{tokens: apiauth.New(db)}
	if err := gate.Verify(t.Context(), acme); err == nil || !strings.Contains(err.Error(), "all tenants") {
		t.Fatalf("console gate on an acme token: %v, want a refusal naming all tenants", err)
	}
	if err := gate.Verify(t.Context(), ops.Token); err != nil {
		t.Fatalf("console gate on an all-tenants token: %v", err)
	}
	b.ok("tokens", "revoke", ops.ID)
	if err := gate.Verify(t.Context(), ops.Token); err == nil {
		t.Fatal("console gate accepts a revoked token")
	}
	if r := b.run("", "tokens", "revoke", ops.ID); r.code != 1 || !strings.Contains(r.stderr, "no such token") {
		t.Fatalf("second revoke: exit %d, %s", r.code, r.stderr)
	}
}

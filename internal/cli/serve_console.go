package cli

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/claimcheck/claimcheck/internal/apiauth"
	"github.com/claimcheck/claimcheck/internal/console"
)

// mountConsole mounts the web console (internal/console) on serve's mux:
// "/", /console/ and River UI under /riverui/. The doctor page checks the
// retention `claimcheck retention` computes with its defaults and
// --max-attempts, as submit and work do at start-up.
func mountConsole(ctx context.Context, mux *http.ServeMux, g *globals, e *env, logger *slog.Logger) error {
	r, err := defaultRetention(g)
	if err != nil {
		return err
	}
	var ready []console.ReadyCheck
	for _, c := range e.readyChecks(nil) { // /readyz's own checks
		ready = append(ready, console.ReadyCheck{Name: c.name, Check: c.check})
	}
	_, err = console.Mount(ctx, mux, console.Options{
		Pipeline: e.pipe, Gate: consoleGate{tokens: apiauth.New(e.pipe.DB())}, StoreURL: g.store, Retention: r, Logger: logger, Ready: ready,
	})
	return err
}

// consoleGate lets in requests from loopback peers, and from elsewhere
// those with a live all-tenants API token (`claimcheck tokens create
// --all-tenants`): the console shows every tenant's jobs, so a token
// limited to some tenants does not open it.
type consoleGate struct{ tokens *apiauth.Store }

func (consoleGate) Local(r *http.Request) bool { return console.LoopbackPeer(r.RemoteAddr) }

// Verify accepts a live token for all tenants. Errors: apiauth's
// ErrTokenRefused for an unknown or revoked token; a plain error for a
// token limited to some tenants; the database's, wrapped.
func (g consoleGate) Verify(ctx context.Context, token string) error {
	t, err := g.tokens.Verify(ctx, token)
	if err != nil {
		return err
	}
	if !t.All() {
		return errors.New("this token is for " + tenantsLabel(t.Tenants) + "; the console needs one for all tenants (tokens create --all-tenants)")
	}
	return nil
}

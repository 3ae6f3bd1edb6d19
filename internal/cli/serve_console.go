package cli

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

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
	_, err = console.Mount(ctx, mux, console.Options{
		Pipeline: e.pipe, Gate: consoleGate{}, StoreURL: g.store, Retention: r, Logger: logger,
	})
	return err
}

// consoleGate lets in requests from loopback peers only: no token is
// accepted yet.
type consoleGate struct{}

func (consoleGate) Local(r *http.Request) bool { return console.LoopbackPeer(r.RemoteAddr) }

func (consoleGate) Verify(context.Context, string) error {
	return errors.New("this server accepts no tokens")
}

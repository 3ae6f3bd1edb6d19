package cli

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/claimcheck/claimcheck/internal/apiauth"
	"github.com/claimcheck/claimcheck/internal/httpapi"
)

// mountAPI mounts the versioned HTTP API (internal/httpapi) on serve's mux
// under /v1/, with the job database's API tokens and --max-payload-size.
func mountAPI(mux *http.ServeMux, g *globals, e *env, logger *slog.Logger) (*httpapi.API, error) {
	api, err := httpapi.New(httpapi.Options{
		Pipeline: e.pipe, Tokens: apiauth.New(e.pipe.DB()), Logger: logger, MaxPayloadSize: g.maxPayloadSize,
	})
	if err != nil {
		return nil, err
	}
	mux.Handle(httpapi.PathPrefix, api.Handler())
	return api, nil
}

// apiAccess says who the API answers, for serve's banner.
func apiAccess(ctx context.Context, e *env) string {
	ok, err := apiauth.New(e.pipe.DB()).Configured(ctx)
	switch {
	case err != nil:
		return "tokens unreadable: " + err.Error()
	case ok:
		return "with a bearer token (claimcheck tokens)"
	}
	return "no tokens: from this host only"
}

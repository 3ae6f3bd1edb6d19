package cli

// OpenTelemetry for every command (internal/telemetry), and the HTTP
// endpoints of serve and work --http: /metrics, /healthz, /readyz.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/claimcheck/claimcheck/internal/telemetry"
)

// telState is a command's OpenTelemetry, made on first use.
type telState struct {
	once sync.Once
	tel  *telemetry.Telemetry
	err  error
}

// telemetry returns the command's providers: those the context carries
// (telemetry.NewContext), else made once from the OTEL_* environment.
func (g *globals) telemetry(ctx context.Context) (*telemetry.Telemetry, error) {
	if t := telemetry.FromContext(ctx); t != nil {
		return t, nil
	}
	if g.tel == nil {
		g.tel = &telState{}
	}
	g.tel.once.Do(func() {
		g.tel.tel, g.tel.err = telemetry.New(ctx, telemetry.Options{})
		if g.tel.err != nil {
			g.tel.err = usagef("%v", g.tel.err)
		}
	})
	return g.tel.tel, g.tel.err
}

// closeTelemetry flushes the spans of providers telemetry made (within 5 s).
func (g *globals) closeTelemetry(ctx context.Context) {
	if g.tel == nil || g.tel.tel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.tel.tel.Shutdown(ctx); err != nil {
		fmt.Fprintf(g.stderr, "claimcheck: telemetry: %v\n", err)
	}
}

// readyCheck is one dependency /readyz asks.
type readyCheck struct {
	name  string
	check func(context.Context) error
}

// readyTimeout bounds each /readyz check.
const readyTimeout = 5 * time.Second

// readyChecks are /readyz's: the job database, the stores (answering,
// and still holding the namespace marker of a namespace the job database
// owns: pipeline.CheckStores) and, when the command consumes a broker,
// the broker.
func (e *env) readyChecks(ping func(context.Context) error) []readyCheck {
	checks := []readyCheck{
		{"database", func(ctx context.Context) error { return e.pipe.DB().PingContext(ctx) }},
		{"store", func(ctx context.Context) error { return e.pipe.CheckStores(ctx) }},
	}
	if ping != nil {
		checks = append(checks, readyCheck{"broker", ping})
	}
	return checks
}

// mountObservability adds /metrics, /healthz (the process answers) and
// /readyz (every check passes: 200, each "ok NAME"; else 503, each
// failing one "FAIL NAME: error") to mux.
func mountObservability(mux *http.ServeMux, tel *telemetry.Telemetry, checks []readyCheck) {
	mux.Handle("GET /metrics", tel.MetricsHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		lines := make([]string, len(checks))
		failed := false
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, c := range checks {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
				defer cancel()
				err := c.check(ctx)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = true
					lines[i] = fmt.Sprintf("FAIL %s: %s", c.name, strings.TrimPrefix(err.Error(), "claimcheck: "))
					return
				}
				lines[i] = "ok " + c.name
			})
		}
		wg.Wait()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if failed {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, strings.Join(lines, "\n"))
	})
}

// serveObservability serves mountObservability's endpoints on addr until
// the returned stop is called, saying where on w.
func serveObservability(ctx context.Context, addr string, tel *telemetry.Telemetry, checks []readyCheck, w io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mountObservability(mux, tel, checks)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(w, "metrics and health on http://%s (/metrics, /healthz, /readyz)\n", ln.Addr())
	go func() { _ = srv.Serve(ln) }()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

// validateHTTPAddr checks an optional --http host:port.
func validateHTTPAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usagef("--http %q: give host:port, e.g. 127.0.0.1:9090", addr)
	}
	return nil
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/resulturl"
)

const defaultServeAddr = "127.0.0.1:8080"

// serveOptions are the options of serve.
type serveOptions struct {
	existing
	addr string
}

// Validate checks --addr is host:port.
func (o *serveOptions) Validate() error {
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return usagef("--addr %q: give host:port, e.g. 127.0.0.1:8080", o.addr)
	}
	return nil
}

func newServe(g *globals) *cobra.Command {
	o := &serveOptions{existing: existing{g}}
	c := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8080]",
		Short: "Serve signed result URLs (see claimcheck url)",
		Args:  exactArgs(0, "no arguments"),
		RunE:  runE(o, nil),
	}
	c.Flags().StringVar(&o.addr, "addr", defaultServeAddr, "listen address")
	return c
}

func (o *serveOptions) runIn(ctx context.Context, s streams, e *env) error {
	signer, err := e.signer("http://" + o.addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	logger := slog.New(slog.NewTextHandler(s.err, nil))
	mux := http.NewServeMux()
	mux.Handle(resulturl.PathPrefix, resulturl.Handler(signer, e.pipe.OpenResult, logger))
	tel, err := o.g.telemetry(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	mountObservability(mux, tel, e.readyChecks(nil))
	if err := mountConsole(ctx, mux, o.g, e, logger); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(s.out, "serving signed result URLs on http://%s%s\n", ln.Addr(), resulturl.PathPrefix)
	fmt.Fprintf(s.out, "web console on http://%s/ (from this host; from others with a token)\n", ln.Addr())
	fmt.Fprintf(s.out, "metrics and health on http://%s (/metrics, /healthz, /readyz)\n", ln.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

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

	"github.com/claimcheck/claimcheck/internal/httpapi"
	"github.com/claimcheck/claimcheck/resulturl"
)

const defaultServeAddr = "127.0.0.1:8080"

// serveOptions are the options of serve.
type serveOptions struct {
	existing
	addr            string
	tlsCert, tlsKey string
}

// opening opens an existing deployment, and makes its payload key if it
// has none yet, as submit does: the HTTP API checks payloads in.
func (o *serveOptions) opening() (*globals, openOptions) {
	return o.g, openOptions{readOnly: true, makeKey: true}
}

// Validate checks --addr is host:port, and that --tls-cert and --tls-key
// come together.
func (o *serveOptions) Validate() error {
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return usagef("--addr %q: give host:port, e.g. 127.0.0.1:8080", o.addr)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return usagef("--tls-cert and --tls-key: give both, or neither")
	}
	return nil
}

func newServe(g *globals) *cobra.Command {
	o := &serveOptions{existing: existing{g}}
	c := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8080] [--tls-cert FILE --tls-key FILE]",
		Short: "Serve the HTTP API (/v1), signed result URLs and the web console",
		Args:  exactArgs(0, "no arguments"),
		RunE:  runE(o, nil),
	}
	c.Flags().StringVar(&o.addr, "addr", defaultServeAddr, "listen address")
	c.Flags().StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain) file")
	c.Flags().StringVar(&o.tlsKey, "tls-key", "", "the PEM private key of --tls-cert")
	return c
}

func (o *serveOptions) runIn(ctx context.Context, s streams, e *env) error {
	scheme := "http"
	if o.tlsCert != "" {
		scheme = "https"
	}
	signer, err := e.signer(scheme + "://" + o.addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	logger := slog.New(o.g.logHandler(s.err, nil))
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
	api, err := mountAPI(mux, o.g, e, logger)
	if err != nil {
		ln.Close()
		return err
	}
	defer api.Close()
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: httpapi.ServerMaxHeaderBytes}
	fmt.Fprintf(s.out, "serving signed result URLs on %s://%s%s\n", scheme, ln.Addr(), resulturl.PathPrefix)
	fmt.Fprintf(s.out, "HTTP API on %s://%s/v1/ (%s)\n", scheme, ln.Addr(), apiAccess(ctx, e))
	fmt.Fprintf(s.out, "web console on %s://%s/ (from this host; from others with a token)\n", scheme, ln.Addr())
	fmt.Fprintf(s.out, "metrics and health on %s://%s (/metrics, /healthz, /readyz)\n", scheme, ln.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if o.tlsCert != "" {
		err = srv.ServeTLS(ln, o.tlsCert, o.tlsKey)
	} else {
		err = srv.Serve(ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

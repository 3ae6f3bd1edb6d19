package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/resulturl"
)

func newServe(g *globals) *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use: "serve [--addr 127.0.0.1:8080]",
		PreRunE: func(*cobra.Command, []string) error {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return usagef("--addr %q: give host:port, e.g. 127.0.0.1:8080", addr)
			}
			return nil
		},
		Short: "Serve signed result URLs (see claimcheck url)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := g.openExisting(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			s, err := e.signer("http://" + addr)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			mux := http.NewServeMux()
			mux.Handle(resulturl.PathPrefix, resulturl.Handler(s, e.pipe.OpenResult, logger))
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "serving signed result URLs on http://%s%s\n", ln.Addr(), resulturl.PathPrefix)
			go func() {
				<-cmd.Context().Done()
				shutdown, cancel := ctxTimeout(5 * time.Second)
				defer cancel()
				_ = srv.Shutdown(shutdown)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	c.Flags().StringVar(&addr, "addr", defaultServeAddr, "listen address")
	return c
}

const defaultServeAddr = "127.0.0.1:8080"

package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/resulturl"
)

// urlKeyFile holds the result-URL signing key, created on first use.
const urlKeyFile = "url.key"

const defaultServeAddr = "127.0.0.1:8080"

func (e *env) signer(baseURL string) (*resulturl.Signer, error) {
	key, err := localKey(e.data, urlKeyFile)
	if err != nil {
		return nil, err
	}
	return &resulturl.Signer{Key: key, BaseURL: baseURL}, nil
}

func newURL(g *globals) *cobra.Command {
	var ttl time.Duration
	var base string
	c := &cobra.Command{
		Use:   "url JOB [--ttl 15m]",
		Short: "Print a short-lived signed URL for a job's result, served by claimcheck serve",
		Long: `Print a URL that fetches a job's verified result until it expires, for handing
to a customer. It is made now and stored nowhere; changing any character of it
makes it fail. Serve it with: claimcheck serve.`,
		Args: exactArgs(1, "a job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := pipeline.ParseJobID(args[0])
			if err != nil {
				return usagef("%v", err)
			}
			e, err := g.openExisting(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			j, err := e.pipe.Get(cmd.Context(), id)
			if err != nil {
				return err
			}
			if j.ResultTicket() == nil {
				return fmt.Errorf("job %d (%s): %w", id, j.State, pipeline.ErrNoResult)
			}
			s, err := e.signer(base)
			if err != nil {
				return err
			}
			u, err := s.Sign(id, ttl)
			if err != nil {
				return usagef("%v", err)
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"url": u, "expires": time.Now().Add(ttl).UTC().Truncate(time.Second)})
			}
			fmt.Fprintln(cmd.OutOrStdout(), u)
			return nil
		},
	}
	c.Flags().DurationVar(&ttl, "ttl", 15*time.Minute, "how long the URL works")
	c.Flags().StringVar(&base, "base-url", "http://"+defaultServeAddr, "where claimcheck serve is reachable")
	return c
}

func newServe(g *globals) *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8080]",
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

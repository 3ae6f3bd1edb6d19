package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/resulturl"
)

// urlKeyFile holds the result-URL signing key, created on first use.
const urlKeyFile = "url.key"

func (e *env) signer(baseURL string) (*resulturl.Signer, error) {
	key, err := localKey(e.data, urlKeyFile, nil)
	if err != nil {
		return nil, err
	}
	return &resulturl.Signer{Key: key, BaseURL: baseURL}, nil
}

// URL kinds, as printed by url --json ("served_by").
const (
	servedByS3         = "s3"
	servedByClaimcheck = "claimcheck"
)

func newURL(g *globals) *cobra.Command {
	var ttl time.Duration
	var ttlText string
	var base string
	var served bool
	c := &cobra.Command{
		Use:   "url JOB [--ttl 15m] [--base-url URL] [--served]",
		Short: "Print a short-lived URL for a job's result: S3 presigned, or signed and served by claimcheck serve",
		Long: `Print a URL that fetches a job's result until it expires (--ttl, 1s to 7 days),
for handing to a customer. It is made now and stored nowhere (never in a
ticket or a message); changing any character of it makes it fail.

On an s3:// store without payload encryption (--keeper none) it is an S3
presigned URL: S3 answers it, and claimcheck serve is not needed. S3 serves
the object as stored, without claimcheck's verification on the way (--json
prints the result's sha256 and size for the recipient to check); the URL
shows the object's key, and works no longer than the credentials that signed
it (temporary credentials end it sooner).

With payload encryption on (the default keeper, or any --keeper but none),
the object holds ciphertext and a presigned URL would hand that out: the URL
is then claimcheck's own, HMAC-signed, answered by claimcheck serve, which
streams the result verified against its ticket and decrypted. The same holds
for file:// stores, for a result small enough to travel inline in its ticket
(there is no object), and with --served.`,
		Args: exactArgs(1, "a job id"),
		PreRunE: func(*cobra.Command, []string) error {
			var err error
			if ttl, err = claimcheck.ParseDuration(ttlText); err != nil {
				return usagef("--ttl %q: %v", ttlText, err)
			}
			if ttl < time.Second || ttl > resulturl.MaxTTL {
				return usagef("--ttl %s: use 1s to %s", ttl, resulturl.MaxTTL)
			}
			return nil
		},
		RunE: g.withJob(func(cmd *cobra.Command, e *env, id int64) error {
			j, err := e.pipe.Get(cmd.Context(), id)
			if err != nil {
				return err
			}
			rt := j.ResultTicket()
			if rt == nil {
				return fmt.Errorf("job %d (%s): %w", id, j.State, pipeline.ErrNoResult)
			}
			if !served {
				u, err := e.store.PresignedURL(cmd.Context(), rt, ttl)
				switch {
				case err == nil:
					return printURL(cmd, g.json, u, ttl, servedByS3, rt)
				case errors.Is(err, claimcheck.ErrNoPresignedURL):
					// An unencrypted S3 store presigns unless the result
					// is inline: say why this URL needs claimcheck serve.
					if e.keeper == nil && isS3Store(g.store) {
						fmt.Fprintf(cmd.ErrOrStderr(), "note: no presigned URL for job %d's result (%s); this URL is answered by claimcheck serve\n",
							id, strings.TrimSuffix(strings.TrimPrefix(err.Error(), "claimcheck: "), ": "+claimcheck.ErrNoPresignedURL.Error()))
					}
				default:
					return err
				}
			}
			s, err := e.signer(base)
			if err != nil {
				return err
			}
			u, err := s.Sign(id, ttl)
			if err != nil {
				return usagef("%v", err)
			}
			return printURL(cmd, g.json, u, ttl, servedByClaimcheck, rt)
		}),
	}
	c.Flags().StringVar(&ttlText, "ttl", "15m", "how long the URL works (1s to 7d; Go units plus d and w)")
	c.Flags().StringVar(&base, "base-url", "http://"+defaultServeAddr, "where claimcheck serve is reachable (for a URL claimcheck serves)")
	c.Flags().BoolVar(&served, "served", false, "give a URL answered by claimcheck serve (verified, decrypted) even where the store could presign one")
	return c
}

// printURL prints a result URL; with --json, an object with url, expires
// and served_by ("s3" or "claimcheck"), and for a presigned URL, which
// claimcheck does not verify on the way, the result's sha256 and size.
func printURL(cmd *cobra.Command, asJSON bool, u string, ttl time.Duration, servedBy string, rt *claimcheck.Ticket) error {
	if !asJSON {
		fmt.Fprintln(cmd.OutOrStdout(), u)
		return nil
	}
	out := map[string]any{"url": u, "expires": time.Now().Add(ttl).UTC().Truncate(time.Second), "served_by": servedBy}
	if servedBy == servedByS3 {
		out["sha256"], out["size"] = rt.SHA256, rt.Size
	}
	return printJSON(cmd.OutOrStdout(), out)
}

// isS3Store reports whether the --store URL is an s3:// one.
func isS3Store(store string) bool { return strings.HasPrefix(strings.ToLower(store), "s3://") }

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// urlOptions are the options of url.
type urlOptions struct {
	existing
	job           jobArg
	ttlText, base string
	served        bool
	ttl           time.Duration // --ttl parsed by Validate
}

// Validate parses --ttl (1s to resulturl.MaxTTL) and checks the job id.
func (o *urlOptions) Validate() error {
	var err error
	if o.ttl, err = claimcheck.ParseDuration(o.ttlText); err != nil {
		return usagef("--ttl %q: %v", o.ttlText, err)
	}
	if o.ttl < time.Second || o.ttl > resulturl.MaxTTL {
		return usagef("--ttl %s: use 1s to %s", o.ttl, resulturl.MaxTTL)
	}
	return o.job.parse()
}

func newURL(g *globals) *cobra.Command {
	o := &urlOptions{existing: existing{g}}
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
		RunE: runE(o, o.job.bind),
	}
	c.Flags().StringVar(&o.ttlText, "ttl", "15m", "how long the URL works (1s to 7d; Go units plus d and w)")
	c.Flags().StringVar(&o.base, "base-url", "http://"+defaultServeAddr, "where claimcheck serve is reachable (for a URL claimcheck serves)")
	c.Flags().BoolVar(&o.served, "served", false, "give a URL answered by claimcheck serve (verified, decrypted) even where the store could presign one")
	c.ValidArgsFunction = completeJobIDs(g, "")
	return c
}

func (o *urlOptions) runIn(ctx context.Context, s streams, e *env) error {
	g, id, ttl := o.g, o.job.id, o.ttl
	j, err := e.pipe.Get(ctx, id)
	if err != nil {
		return err
	}
	rt := j.ResultTicket()
	if rt == nil {
		return fmt.Errorf("job %d (%s): %w", id, j.State, pipeline.ErrNoResult)
	}
	if !o.served {
		st, storeURL, err := e.storeFor(rt)
		if err != nil {
			return err
		}
		u, err := st.PresignedURL(ctx, rt, ttl)
		switch {
		case err == nil:
			return printURL(s.out, g.json, u, ttl, servedByS3, rt)
		case errors.Is(err, claimcheck.ErrNoPresignedURL):
			// An unencrypted S3 store presigns unless the result
			// is inline: say why this URL needs claimcheck serve.
			if e.keeper == nil && isS3Store(storeURL) {
				fmt.Fprintf(s.err, "note: no presigned URL for job %d's result (%s); this URL is answered by claimcheck serve\n",
					id, strings.TrimSuffix(strings.TrimPrefix(err.Error(), "claimcheck: "), ": "+claimcheck.ErrNoPresignedURL.Error()))
			}
		default:
			return err
		}
	}
	signer, err := e.signer(o.base)
	if err != nil {
		return err
	}
	u, err := signer.Sign(id, ttl)
	if err != nil {
		return usagef("%v", err)
	}
	return printURL(s.out, g.json, u, ttl, servedByClaimcheck, rt)
}

// printURL prints a result URL; with --json, an object with url, expires
// and served_by ("s3" or "claimcheck"), and for a presigned URL, which
// claimcheck does not verify on the way, the result's sha256 and size.
func printURL(w io.Writer, asJSON bool, u string, ttl time.Duration, servedBy string, rt *claimcheck.Ticket) error {
	if !asJSON {
		fmt.Fprintln(w, u)
		return nil
	}
	out := map[string]any{"url": u, "expires": time.Now().Add(ttl).UTC().Truncate(time.Second), "served_by": servedBy}
	if servedBy == servedByS3 {
		out["sha256"], out["size"] = rt.SHA256, rt.Size
	}
	return printJSON(w, out)
}

// isS3Store reports whether the --store URL is an s3:// one.
func isS3Store(store string) bool { return strings.HasPrefix(strings.ToLower(store), "s3://") }

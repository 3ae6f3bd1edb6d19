package cli

import (
	"context"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/lifecycle"
)

// lifecycleOptions are the options of lifecycle; its retention flags are
// lifecycle apply's too.
type lifecycleOptions struct {
	g      *globals
	in     retentionFlags
	format string
	r      *claimcheck.Retention // the sum, made by Validate
	ns     string                // --store's namespace, read by Validate
}

// Validate adds up the retention flags and checks --format and the
// namespace of --store.
func (o *lifecycleOptions) Validate() (err error) {
	if o.r, err = o.in.compute(o.g.maxAttempts); err != nil {
		return err
	}
	if o.format != "s3" && o.format != "gcs" {
		return usagef("--format %q: use s3 or gcs", o.format)
	}
	o.ns, err = storeNamespace(o.g.store)
	return err
}

func newLifecycle(g *globals) *cobra.Command {
	o := &lifecycleOptions{g: g}
	c := &cobra.Command{
		Use:   "lifecycle [--format s3|gcs] [--backlog D ... as for retention]",
		Short: "Print the bucket lifecycle policy that enforces the retention",
		Long: `Print the bucket lifecycle configuration for claimcheck's prefixes: objects
under payloads/ and results/ expire after the minimum lifetime that
"claimcheck retention" computes from the same flags, and incomplete multipart
uploads are aborted after 1 day.

"claimcheck lifecycle apply" installs it on an S3 bucket (--store s3://...),
merged with the bucket's existing rules.

--format s3 (default) prints the PutBucketLifecycleConfiguration body
(aws s3api put-bucket-lifecycle-configuration --lifecycle-configuration
file://policy.json); --format gcs prints the Cloud Storage form (gcloud
storage buckets update gs://BUCKET --lifecycle-file=policy.json).

A bucket has ONE lifecycle configuration and installing one replaces it
whole: merge these rules with the bucket's existing ones (lifecycle apply
does) instead of installing them alone, or other teams' rules are silently
deleted. The file
store has no lifecycle engine: "claimcheck sweep --expire-payloads ...
--expire-results ..." enforces the same expiry there.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	c.Flags().StringVar(&o.format, "format", "s3", "s3 or gcs")
	_ = c.RegisterFlagCompletionFunc("format", completeWords("s3", "gcs"))
	o.in.register(c.PersistentFlags())
	c.AddCommand(newLifecycleApply(g, &o.in))
	return c
}

// storeNamespace is the namespace (prefix=) of a store URL, "" for none
// or no URL, for commands that do not open the store.
func storeNamespace(store string) (string, error) {
	u, err := url.Parse(store)
	if err != nil || !u.Query().Has("prefix") {
		return "", nil
	}
	ns, err := claimcheck.ValidateNamespace(u.Query().Get("prefix"))
	if err != nil {
		return "", usagef("--store: %v", err)
	}
	return ns, nil
}

func (o *lifecycleOptions) run(ctx context.Context, s streams) error {
	p := lifecycle.FromRetention(o.r).InNamespace(o.ns)
	b, err := p.S3JSON()
	if o.format == "gcs" {
		b, err = p.GCSJSON()
	}
	if err != nil {
		return err
	}
	if _, err := s.out.Write(b); err != nil {
		return err
	}
	fmt.Fprintf(s.err, "claimcheck: %s expire after %s, %s after %s, incomplete uploads are aborted after 1 day (claimcheck retention explains the sum); merge with the bucket's existing rules rather than replacing them\n",
		claimcheck.PrefixPayloads, days(p.PayloadDays), claimcheck.PrefixResults, days(p.ResultDays))
	return nil
}

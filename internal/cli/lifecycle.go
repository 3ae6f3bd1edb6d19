package cli

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/lifecycle"
)

func newLifecycle(g *globals) *cobra.Command {
	var in retentionFlags
	var format string
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := in.compute(g)
			if err != nil {
				return err
			}
			ns, err := storeNamespace(g.store)
			if err != nil {
				return err
			}
			p := lifecycle.FromRetention(r).InNamespace(ns)
			var b []byte
			switch format {
			case "s3":
				b, err = p.S3JSON()
			case "gcs":
				b, err = p.GCSJSON()
			default:
				return usagef("--format %q: use s3 or gcs", format)
			}
			if err != nil {
				return err
			}
			if _, err := cmd.OutOrStdout().Write(b); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "claimcheck: %s expire after %s, %s after %s, incomplete uploads are aborted after 1 day (claimcheck retention explains the sum); merge with the bucket's existing rules rather than replacing them\n",
				claimcheck.PrefixPayloads, days(p.PayloadDays), claimcheck.PrefixResults, days(p.ResultDays))
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "s3", "s3 or gcs")
	in.register(c.PersistentFlags())
	c.AddCommand(newLifecycleApply(g, &in))
	return c
}

func newLifecycleApply(g *globals, in *retentionFlags) *cobra.Command {
	var dryRun bool
	c := &cobra.Command{
		Use:   "apply [--dry-run] [--backlog D ... as for retention]",
		Short: "Install the policy on the --store S3 bucket, merged with the bucket's other rules",
		Long: `Read the S3 bucket's lifecycle configuration (--store s3://BUCKET?...), replace
only claimcheck's rules (IDs starting with "claimcheck-"), keep every other
rule exactly as it is, write the result if anything changed, and read it back
to check it. Refused, changing nothing, when another rule would expire or
archive objects under payloads/ or results/ sooner than the retention allows
(the error names it).

S3 has no conditional write for lifecycle configurations: run this from one
place (a deploy step), not from every process.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := in.compute(g)
			if err != nil {
				return err
			}
			u, err := url.Parse(g.store)
			if err != nil || u.Scheme != "s3" || u.Host == "" {
				return usagef("lifecycle apply needs an S3 store: --store s3://BUCKET?region=... (or CLAIMCHECK_STORE); for Cloud Storage install the policy \"claimcheck lifecycle --format gcs\" prints; the file store has no lifecycle engine: run \"claimcheck sweep --expire-payloads ... --expire-results ...\"")
			}
			store, err := claimcheck.OpenStore(cmd.Context(), g.store, nil)
			if err != nil {
				return err
			}
			defer store.Close()
			var client *s3.Client
			if !store.Bucket().As(&client) {
				return fmt.Errorf("lifecycle apply: the s3:// store exposes no S3 client")
			}
			res, err := lifecycle.Apply(cmd.Context(), client, u.Host, lifecycle.FromRetention(r).InNamespace(store.Namespace()), &lifecycle.ApplyOptions{DryRun: dryRun})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			out := cmd.OutOrStdout()
			list := func(ids []string) string {
				if len(ids) == 0 {
					return "none"
				}
				return strings.Join(ids, ", ")
			}
			switch {
			case !res.Changed():
				fmt.Fprintf(out, "bucket %s already has claimcheck's rules: nothing to change\n", res.Bucket)
			case res.DryRun:
				fmt.Fprintf(out, "dry run: bucket %s would get claimcheck's rules (nothing written)\n", res.Bucket)
			default:
				fmt.Fprintf(out, "bucket %s: lifecycle configuration written and read back\n", res.Bucket)
			}
			ns := store.Namespace()
			fmt.Fprintf(out, "  %s expire after %s, %s after %s; incomplete uploads aborted after 1 day\n",
				ns+claimcheck.PrefixPayloads, days(r.PayloadDays), ns+claimcheck.PrefixResults, days(r.ResultDays))
			fmt.Fprintf(out, "  other rules kept as they were: %s\n", list(res.Foreign))
			fmt.Fprintf(out, "  claimcheck rules added: %s; replaced: %s; unchanged: %s; removed: %s\n",
				list(res.Added), list(res.Replaced), list(res.Unchanged), list(res.Removed))
			return nil
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "read and merge, write nothing")
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

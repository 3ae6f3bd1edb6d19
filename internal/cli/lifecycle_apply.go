package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/lifecycle"
)

// lifecycleApplyOptions are the options of lifecycle apply: its own, and
// the retention flags of lifecycle.
type lifecycleApplyOptions struct {
	g      *globals
	in     *retentionFlags // lifecycle's
	dryRun bool
	r      *claimcheck.Retention // the sum, made by Validate
}

// Validate adds up the retention flags and checks --store is an S3 bucket.
func (o *lifecycleApplyOptions) Validate() (err error) {
	if o.r, err = o.in.compute(o.g.maxAttempts); err != nil {
		return err
	}
	u, err := url.Parse(o.g.store)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return usagef("lifecycle apply needs an S3 store: --store s3://BUCKET?region=... (or CLAIMCHECK_STORE); for Cloud Storage install the policy \"claimcheck lifecycle --format gcs\" prints; the file store has no lifecycle engine: run \"claimcheck sweep --expire-payloads ... --expire-results ...\"")
	}
	return nil
}

func newLifecycleApply(g *globals, in *retentionFlags) *cobra.Command {
	o := &lifecycleApplyOptions{g: g, in: in}
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
		RunE: runE(o, nil),
	}
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "read and merge, write nothing")
	return c
}

func (o *lifecycleApplyOptions) run(ctx context.Context, s streams) error {
	g, r := o.g, o.r
	store, err := claimcheck.OpenStore(ctx, g.store, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	m, err := lifecycle.ManagerOf(store)
	if err != nil {
		return fmt.Errorf("lifecycle apply: %w", err)
	}
	res, err := lifecycle.Apply(ctx, m, lifecycle.FromRetention(r).InNamespace(store.Namespace()), &lifecycle.ApplyOptions{DryRun: o.dryRun})
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(s.out, res)
	}
	out := s.out
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
}

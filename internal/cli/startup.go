package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/ops"
)

// startupChecks are what submit and work check before they take or make
// a job, for each configured store: its bucket exists, is the one the URL means, and can be
// read and written (claimcheck.Store.CheckBucket: a wrong bucket, region
// or endpoint is a configuration error, exit 2, naming it); and, on S3,
// that the bucket's lifecycle rules expire nothing under payloads/ or
// results/ sooner than `claimcheck retention` requires with the same
// settings (ops.StartupExpiry, read once per process). A rule that does
// is a warning on stderr, or with strict a refusal (exit 2); a lifecycle
// configuration that cannot be read is a warning either way.
func (e *env) startupChecks(ctx context.Context, g *globals, stderr io.Writer, strict bool) error {
	r, err := defaultRetention(g)
	if err != nil {
		return err
	}
	for i, st := range e.stores {
		// Each configured store (--store NAME=URL) is checked; messages
		// name it when there are several.
		which := ""
		if len(e.stores) > 1 {
			which = "store " + e.specs[i].label() + ": "
		}
		if err := st.CheckBucket(ctx, true); err != nil {
			if which != "" {
				return fmt.Errorf("%s%w", which, err)
			}
			return err
		}
		checks, err := ops.StartupExpiry(ctx, st, r)
		if err != nil {
			fmt.Fprintf(stderr, "claimcheck: warning: %scannot check the bucket's expiry against the retention (%v); \"claimcheck doctor\" checks it\n", which, err)
			continue
		}
		var details []string
		for _, c := range checks {
			details = append(details, which+c.Detail)
		}
		if len(details) > 0 && strict {
			return fmt.Errorf("refusing to start (--strict): %s: %w", strings.Join(details, "; "), claimcheck.ErrConfig)
		}
		for _, d := range details {
			fmt.Fprintf(stderr, "claimcheck: warning: %s (--strict refuses to start)\n", d)
		}
	}
	return nil
}

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
// a job: the store's bucket exists, is the one the URL means, and can be
// read and written (claimcheck.Store.CheckBucket: a wrong bucket, region
// or endpoint is a configuration error, exit 2, naming it); and, on S3,
// that the bucket's lifecycle rules expire nothing under payloads/ or
// results/ sooner than `claimcheck retention` requires with the same
// settings (ops.StartupExpiry, read once per process). A rule that does
// is a warning on stderr, or with strict a refusal (exit 2); a lifecycle
// configuration that cannot be read is a warning either way.
func (e *env) startupChecks(ctx context.Context, g *globals, stderr io.Writer, strict bool) error {
	if err := e.store.CheckBucket(ctx, true); err != nil {
		return err
	}
	r, err := defaultRetention(g)
	if err != nil {
		return err
	}
	checks, err := ops.StartupExpiry(ctx, e.store, r)
	if err != nil {
		fmt.Fprintf(stderr, "claimcheck: warning: cannot check the bucket's expiry against the retention (%v); \"claimcheck doctor\" checks it\n", err)
		return nil
	}
	if len(checks) == 0 {
		return nil
	}
	var details []string
	for _, c := range checks {
		details = append(details, c.Detail)
	}
	if strict {
		return fmt.Errorf("refusing to start (--strict): %s: %w", strings.Join(details, "; "), claimcheck.ErrConfig)
	}
	for _, d := range details {
		fmt.Fprintf(stderr, "claimcheck: warning: %s (--strict refuses to start)\n", d)
	}
	return nil
}

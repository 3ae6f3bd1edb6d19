package sweep

// The gauges of the last sweep (docs/observability.md).

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimcheck/claimcheck"
)

// record sets the gauges of the last sweep on the store's meter provider
// (claimcheck.Store.Telemetry): claimcheck.sweep.orphans.found and
// claimcheck.sweep.orphans.removed (objects with no registry row past the
// grace period), by dry_run and outcome (ok, or the error's reason for a
// sweep that stopped early, counted so far).
func record(ctx context.Context, store *claimcheck.Store, rep *Report, err error) {
	mp, _ := store.Telemetry()
	m := mp.Meter(claimcheck.InstrumentationName)
	found, ferr := m.Int64Gauge("claimcheck.sweep.orphans.found", metric.WithUnit("{object}"),
		metric.WithDescription("Orphans (objects no registry row refers to, past the grace period) the last sweep found."))
	removed, rerr := m.Int64Gauge("claimcheck.sweep.orphans.removed", metric.WithUnit("{object}"),
		metric.WithDescription("Orphans the last sweep removed (0 for a dry run)."))
	if ferr != nil || rerr != nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = claimcheck.Reason(err)
	}
	attrs := metric.WithAttributes(attribute.Bool("claimcheck.dry_run", rep.DryRun), claimcheck.AttrOutcome.String(outcome))
	n := int64(rep.RemovedByReason[Orphan])
	if rep.DryRun {
		n = 0 // the report counts what a real sweep would remove
	}
	found.Record(ctx, int64(rep.ByReason[Orphan]), attrs)
	removed.Record(ctx, n, attrs)
}

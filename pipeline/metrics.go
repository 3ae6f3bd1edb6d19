package pipeline

// Metrics and the per-attempt log line of the one worker (Work, over the
// job database or a broker): both settle each attempt through observe.
// docs/observability.md lists the metrics; the instruments are
// pipeline/internal/jobtel's.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobtel"
)

// riverTelemetry is River's OpenTelemetry middleware on the store's
// providers (jobtel.NewRiver).
func (p *Pipeline) riverTelemetry() *jobtel.River { return jobtel.NewRiver(p.store) }

// registerGauges registers the pipeline's observable gauges, read when
// the metrics are collected (a /metrics scrape): the outbox's depth and
// oldest entry's age per destination (OutboxStats) and the queue's jobs
// per kind and state, oldest job still to be worked per kind and dead
// letters per kind and reason (QueueStats), each read at most once per
// QueueStatsCachePeriod; the bytes and objects the claims registry holds
// per tenant and role (StorageByTenant), at most once per
// StorageCachePeriod. Only the first collection waits for the job
// database; later ones are answered from the last reading while the next
// is made in the background (cached). The registration ends with Close.
func (p *Pipeline) registerGauges() {
	mp, _ := p.store.Telemetry()
	m := mp.Meter(claimcheck.InstrumentationName)
	depth := jobtel.Must(m.Int64ObservableGauge("claimcheck.outbox.depth",
		metric.WithUnit("{entry}"), metric.WithDescription("Outbox entries not yet confirmed by the broker, by destination.")))
	age := jobtel.Must(m.Float64ObservableGauge("claimcheck.outbox.oldest_age",
		metric.WithUnit("s"), metric.WithDescription("Age of the oldest outbox entry not yet confirmed, by destination (0 when none).")))
	queued := jobtel.Must(m.Int64ObservableGauge("claimcheck.queue.jobs",
		metric.WithUnit("{job}"), metric.WithDescription("Jobs in the job database by kind and state (River's states, and waiting); outbox entries excluded. Read at most every 5 s.")))
	oldest := jobtel.Must(m.Float64ObservableGauge("claimcheck.queue.oldest_age",
		metric.WithUnit("s"), metric.WithDescription("Age of the oldest job still to be worked (available, retryable or waiting) by kind, from its enqueue (0 when none).")))
	dead := jobtel.Must(m.Int64ObservableGauge("claimcheck.queue.dead_letters",
		metric.WithUnit("{job}"), metric.WithDescription("Dead letters in the job database (cancelled and discarded jobs) by kind and reason.")))
	heldBytes := jobtel.Must(m.Int64ObservableGauge("claimcheck.storage.held",
		metric.WithUnit("By"), metric.WithDescription("Payload bytes of the objects the claims registry records, by tenant and role (payload, result). Read at most every 30 s.")))
	heldObjects := jobtel.Must(m.Int64ObservableGauge("claimcheck.storage.held_objects",
		metric.WithUnit("{object}"), metric.WithDescription("Objects the claims registry records, by tenant and role (payload, result).")))
	now := func() time.Time {
		if p.gaugeNow != nil {
			return p.gaugeNow()
		}
		return time.Now()
	}
	outbox := jobs.NewCached(QueueStatsCachePeriod, now, p.OutboxStats)
	queue := jobs.NewCached(QueueStatsCachePeriod, now, p.QueueStats)
	storage := jobs.NewCached(StorageCachePeriod, now, p.StorageByTenant)
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var errs []error
		if stats, err := outbox.Get(ctx); err != nil {
			errs = append(errs, err)
		} else {
			for _, st := range stats {
				dest := metric.WithAttributes(semconv.MessagingDestinationName(st.Destination))
				o.ObserveInt64(depth, st.Depth, dest)
				a := 0.0
				if !st.Oldest.IsZero() {
					a = now().Sub(st.Oldest).Seconds()
				}
				o.ObserveFloat64(age, a, dest)
			}
		}
		if kinds, err := queue.Get(ctx); err != nil {
			errs = append(errs, err)
		} else {
			for _, k := range kinds {
				kind := claimcheck.AttrKind.String(k.Kind)
				for state, n := range k.States {
					o.ObserveInt64(queued, n, metric.WithAttributes(kind, attribute.String("claimcheck.state", state)))
				}
				for reason, n := range k.Dead {
					o.ObserveInt64(dead, n, metric.WithAttributes(kind, claimcheck.AttrReason.String(reason)))
				}
				a := 0.0
				if !k.Oldest.IsZero() {
					a = max(now().Sub(k.Oldest).Seconds(), 0)
				}
				o.ObserveFloat64(oldest, a, metric.WithAttributes(kind))
			}
		}
		if held, err := storage.Get(ctx); err != nil {
			errs = append(errs, err)
		} else {
			for _, h := range held {
				attrs := metric.WithAttributes(claimcheck.AttrTenant.String(h.Tenant), claimcheck.AttrRole.String(h.Role))
				o.ObserveInt64(heldBytes, h.Bytes, attrs)
				o.ObserveInt64(heldObjects, h.Objects, attrs)
			}
		}
		return errors.Join(errs...)
	}, depth, age, queued, oldest, dead, heldBytes, heldObjects)
	if err == nil {
		p.gauges = reg
	}
}

// observe records one settled attempt: its metrics and, at info, one log
// line with the job's id, kind, tenant, digest prefix, size, attempt,
// outcome, reason and the durations of claim, verification and handler.
// Neither holds a payload byte or a full object key.
func (p *Pipeline) observe(ctx context.Context, o Outcome) {
	kind := claimcheck.AttrKind.String(o.Kind)
	if p.tel.Attempts.Enabled(ctx) { // no attribute set for a meter that records nothing
		p.tel.Attempts.Add(ctx, 1, metric.WithAttributes(append(claimcheck.ErrorAttrs(o.Err), kind, claimcheck.AttrOutcome.String(string(o.State)))...))
	}
	if o.State == JobDead {
		p.tel.DeadLetters.Add(ctx, 1, metric.WithAttributes(append(claimcheck.ErrorAttrs(o.Err), kind)...))
	}
	if o.Err != nil {
		cause, _ := claimcheck.CauseOf(o.Err)
		switch o.Reason {
		case claimcheck.ReasonUnavailable, claimcheck.ReasonAccessDenied, claimcheck.ReasonNotVisibleYet:
			p.tel.StoreErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("claimcheck.class", o.Reason), jobtel.AttrCause.String(cause)))
		case claimcheck.ReasonKeeper:
			p.tel.KeeperErrors.Add(ctx, 1, metric.WithAttributes(jobtel.AttrCause.String(cause)))
		}
	}
	level := slog.LevelInfo
	if o.State == JobDead {
		level = slog.LevelWarn
	}
	if !p.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.Int64("job", o.JobID), slog.String("kind", o.Kind), slog.String("tenant", o.Tenant),
		slog.String("sha256", o.SHA256), slog.Int64("size", o.Size), slog.Int("attempt", o.Attempt),
		slog.String("outcome", string(o.State)), slog.String("reason", o.Reason),
		slog.Duration("claim", o.Timings.Claim.Round(time.Microsecond)), slog.Duration("verify", o.Timings.Verify.Round(time.Microsecond)),
		slog.Duration("handler", o.Timings.Handler.Round(time.Microsecond)),
	}
	if o.MessageID != "" {
		attrs = append(attrs, slog.String("message", o.MessageID))
	}
	if o.Err != nil {
		attrs = append(attrs, slog.String("error", o.Err.Error()))
	}
	p.logger.LogAttrs(ctx, level, "job attempt", attrs...)
}

package console

// The overview: readiness, exact counts, the queue by kind, dead letters
// by reason, retention against the lifecycle, the last sweep's orphans,
// and the last hour's throughput and queue depth as server-rendered SVG
// charts.

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/claimcheck/claimcheck/pipeline"
)

// readyTimeout bounds each readiness check, as /readyz's.
const readyTimeout = 5 * time.Second

// readiness is one readiness check's outcome.
type readiness struct {
	Name, Error string
}

// ready runs the readiness checks at once, each within readyTimeout.
func (c *Console) ready(ctx context.Context) []readiness {
	out := make([]readiness, len(c.o.Ready))
	var wg sync.WaitGroup
	for i, rc := range c.o.Ready {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, readyTimeout)
			defer cancel()
			out[i].Name = rc.Name
			if err := rc.Check(ctx); err != nil {
				out[i].Error = strings.TrimPrefix(err.Error(), "claimcheck: ")
			}
		})
	}
	wg.Wait()
	return out
}

// kindRow is one kind's queue on the overview.
type kindRow struct {
	pipeline.KindQueue
	// Waiting is the age of the oldest job still to be worked; 0 for none.
	Waiting time.Duration
}

// reasonCount is one reason's dead letters.
type reasonCount struct {
	Reason string
	N      int64
}

// overview is the landing page.
func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := c.o.Now()
	d := struct {
		Ready                     []readiness
		NotReady                  int
		Dead, Available, Running  int64
		OutboxDepth               int64
		Outboxes                  []pipeline.OutboxStats
		Kinds                     []kindRow
		Reasons                   []reasonCount
		OtherDead                 int64
		Lifetimes                 []lifetime
		Retention                 any
		Throughput, Depth         template.HTML
		Enqueued, Completed, Died int64
		RiverUIError              string
		Threshold                 int64
		Location                  string
	}{Threshold: c.o.Pipeline.Store().InlineThreshold(), Location: c.o.Pipeline.Store().Location(), Retention: c.o.Retention}
	if c.RiverUIError != nil {
		d.RiverUIError = c.RiverUIError.Error()
	}
	d.Ready = c.ready(ctx)
	for _, rd := range d.Ready {
		if rd.Error != "" {
			d.NotReady++
		}
	}
	err := c.counts(ctx, map[string]*int64{pipeline.StateDead: &d.Dead, "available": &d.Available, "running": &d.Running})
	var stats []pipeline.KindQueue
	if err == nil {
		stats, err = c.o.Pipeline.QueueStats(ctx)
	}
	if err == nil {
		d.Outboxes, err = c.o.Pipeline.OutboxStats(ctx)
	}
	var points []pipeline.ActivityPoint
	if err == nil {
		points, err = c.o.Pipeline.Activity(ctx, now.Add(-time.Hour), now, time.Minute)
	}
	if err != nil {
		c.failed(w, r, "/", err)
		return
	}
	for _, o := range d.Outboxes {
		d.OutboxDepth += o.Depth
	}
	byReason := map[string]int64{}
	for _, k := range stats {
		row := kindRow{KindQueue: k}
		if !k.Oldest.IsZero() {
			row.Waiting = max(now.Sub(k.Oldest), time.Second)
		}
		d.Kinds = append(d.Kinds, row)
		for reason, n := range k.Dead {
			byReason[reason] += n
		}
	}
	counted := int64(0)
	for reason, n := range byReason {
		d.Reasons = append(d.Reasons, reasonCount{reason, n})
		counted += n
	}
	slices.SortFunc(d.Reasons, func(a, b reasonCount) int {
		return cmp.Or(cmp.Compare(b.N, a.N), strings.Compare(a.Reason, b.Reason))
	})
	// Outbox entries the relay gave up on and broker dead letters are
	// dead letters too, which QueueStats leaves to OutboxStats.
	d.OtherDead = max(d.Dead-counted, 0)
	d.Lifetimes = c.lifetimes(ctx)
	for _, p := range points {
		d.Enqueued += p.Enqueued
		d.Completed += p.Completed
		d.Died += p.Dead
	}
	d.Throughput = chart("chart-throughput", "Jobs finished per minute", points, []series{
		{"completed", "#17702f", func(p pipeline.ActivityPoint) int64 { return p.Completed }},
		{"dead", "#b42318", func(p pipeline.ActivityPoint) int64 { return p.Dead }},
		{"enqueued", "#1f6feb", func(p pipeline.ActivityPoint) int64 { return p.Enqueued }},
	})
	d.Depth = chart("chart-depth", "Queue depth (jobs enqueued, not yet finished)", points, []series{
		{"depth", "#9a6700", func(p pipeline.ActivityPoint) int64 { return p.Depth }},
	})
	c.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "/", Data: d})
}

// counts sets each *n to the exact number of jobs in its state
// (pipeline.Count).
func (c *Console) counts(ctx context.Context, states map[string]*int64) error {
	for state, n := range states {
		var err error
		if *n, err = c.o.Pipeline.Count(ctx, pipeline.ListOptions{State: state}); err != nil {
			return err
		}
	}
	return nil
}

// series is one line of a chart.
type series struct {
	name, color string
	value       func(pipeline.ActivityPoint) int64
}

// chart draws points as an inline SVG line chart (one polyline and a
// circle per point for each series, the values in each circle's title),
// with the first and last times and the largest value on its axes. The
// text in it is the chart's own (names, numbers, times): nothing from a
// job.
func chart(id, title string, points []pipeline.ActivityPoint, ss []series) template.HTML {
	const w, h, left, right, top, bottom = 760.0, 200.0, 48.0, 12.0, 24.0, 28.0
	peak := int64(1)
	for _, s := range ss {
		for _, p := range points {
			peak = max(peak, s.value(p))
		}
	}
	x := func(i int) float64 {
		if len(points) < 2 {
			return left
		}
		return left + float64(i)*(w-left-right)/float64(len(points)-1)
	}
	y := func(v int64) float64 { return h - bottom - float64(v)*(h-top-bottom)/float64(peak) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" class="chart" role="img" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" xmlns="http://www.w3.org/2000/svg">`, id, w, h, w, h)
	fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="#fff" stroke="#dde2e8"/>`, left, top, w-left-right, h-top-bottom)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%d</text>`, left-4, top+4, peak)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">0</text>`, left-4, h-bottom)
	if len(points) > 0 {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11">%s</text>`, left, h-8, points[0].At.UTC().Format("15:04 UTC"))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%s</text>`, w-right, h-8, points[len(points)-1].At.UTC().Format("15:04 UTC"))
	}
	lx := left + 4
	for _, s := range ss {
		fmt.Fprintf(&b, `<text x="%.0f" y="14" font-size="12" fill="%s">■ %s</text>`, lx, s.color, s.name)
		lx += 14 + 8*float64(len(s.name)) + 12
		var pts []string
		for i, p := range points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(s.value(p))))
		}
		fmt.Fprintf(&b, `<polyline class="series" data-series="%s" fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, s.name, s.color, strings.Join(pts, " "))
		for i, p := range points {
			fmt.Fprintf(&b, `<circle class="point" cx="%.1f" cy="%.1f" r="2" fill="%s"><title>%s %s: %d</title></circle>`,
				x(i), y(s.value(p)), s.color, p.At.UTC().Format("15:04"), s.name, s.value(p))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec G203 -- built here from numbers, times and fixed names only
}

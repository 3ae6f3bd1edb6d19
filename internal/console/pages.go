package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/ops"
	"github.com/claimcheck/claimcheck/pipeline"
)

// page is what every template gets.
type page struct {
	Title string
	// Nav is the path of the page, for the menu.
	Nav string
	// Notice and Error are one-line messages above the content.
	Notice, Error string
	Data          any
}

var funcs = template.FuncMap{
	"bytes": func(n int64) string { return humanize.IBytes(uint64(max(n, 0))) },
	"age": func(d time.Duration) string {
		if d < 0 {
			d = 0
		}
		return claimcheck.FormatDuration(d.Round(time.Second))
	},
	"upper":      func(v any) string { return strings.ToUpper(fmt.Sprint(v)) },
	"add":        func(a, b int64) int64 { return a + b },
	"trimReason": trimReason,
	// dict makes a map of its key, value pairs, for a template's argument.
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, errors.New("dict: odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, errors.New("dict: a key is not a string")
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
}

// trimReason is a recorded error without its leading reason.
func trimReason(reason, err string) string { return strings.TrimPrefix(err, reason+": ") }

// render writes page p with template name.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	var buf bytes.Buffer
	if err := c.pages.ExecuteTemplate(&buf, name, p); err != nil {
		c.o.Logger.Error("console: render", "page", name, "err", err)
		http.Error(w, "console: cannot render the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// refuse answers a request the console will not serve: a page for a
// browser, JSON for River UI's API.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if strings.HasPrefix(r.URL.Path, RiverUIPrefix+"api/") {
		writeAPIError(w, status, msg)
		return
	}
	tmpl := "refused"
	if status == http.StatusUnauthorized {
		tmpl = "login"
	}
	c.render(w, r, status, tmpl, page{Title: http.StatusText(status), Error: msg})
}

// failed shows an error of the job database or store on a page.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, nav string, err error) {
	c.o.Logger.Error("console: page failed", "path", r.URL.Path, "err", err)
	c.render(w, r, http.StatusInternalServerError, "refused", page{Title: "Error", Nav: nav, Error: fmt.Sprintf("%s (%s)", err, claimcheck.Reason(err))})
}

// jobRow is a job as the jobs and dead-letter pages show it.
type jobRow struct {
	*pipeline.JobInfo
	Via       string
	Age       time.Duration
	Placement string
	// PlacementReason says why the payload is inline or offloaded.
	PlacementReason string
	// Redacted is the job's ticket as pages show it.
	Redacted *pipeline.RedactedTicket
	// Detail is the last error without its leading reason.
	Detail string
	// Payload is, for a dead letter: "inline", "exists", "gone" or
	// "unknown: …" (the store could not tell).
	Payload      string
	PayloadThere bool
}

func (c *Console) row(j *pipeline.JobInfo) jobRow {
	since := j.CreatedAt
	if j.FinalizedAt != nil {
		since = *j.FinalizedAt
	}
	r := jobRow{JobInfo: j, Via: "database", Age: c.o.Now().Sub(since), Detail: trimReason(j.Reason, j.Error)}
	if j.Destination != "" {
		r.Via = "broker:" + j.Destination
	}
	if t := j.Ticket(); t != nil {
		r.Redacted = pipeline.Redact(t)
		r.Placement = r.Redacted.Placement
		r.PlacementReason = placementReason(t, c.o.Pipeline.Store().InlineThreshold())
	} else {
		r.Placement, r.PlacementReason = "?", "the ticket does not parse (ticket-invalid)"
	}
	return r
}

// placementReason says why a payload is inline or offloaded, against this
// deployment's inline threshold (the producer's may have been another).
func placementReason(t *claimcheck.Ticket, threshold int64) string {
	size := humanize.IBytes(uint64(t.Size))
	switch {
	case t.IsInline():
		return fmt.Sprintf("%s, within the inline threshold (%s): the ticket carries it", size, humanize.IBytes(uint64(max(threshold, 0))))
	case threshold < 0:
		return fmt.Sprintf("%s; this deployment offloads every payload (--always-offload or --inline-threshold 0)", size)
	case t.Size > threshold:
		return fmt.Sprintf("%s, over the inline threshold (%s)", size, humanize.IBytes(uint64(threshold)))
	default:
		return fmt.Sprintf("%s, within this deployment's threshold (%s): its producer offloaded it (--always-offload or a lower threshold)", size, humanize.IBytes(uint64(threshold)))
	}
}

// refusals are the replay refusals the dead-letter page names after its
// redirect, by a fixed word: the page never echoes text from the URL.
var refusals = map[string]string{
	"payload-gone": pipeline.ErrPayloadGone.Error(),
	"not-dead":     pipeline.ErrNotDead.Error() + " (replayed already, or never dead)",
	"not-found":    pipeline.ErrJobNotFound.Error() + " (pruned or deleted)",
	"store":        "the store could not tell whether its payload still exists; try again",
}

// ReplayRefusal names why pipeline.Replay refused a job, by the words of
// refusals, or "" when err is no refusal (the store or database failed).
func ReplayRefusal(err error) string {
	switch {
	case errors.Is(err, pipeline.ErrPayloadGone):
		return "payload-gone"
	case errors.Is(err, pipeline.ErrNotDead):
		return "not-dead"
	case errors.Is(err, pipeline.ErrJobNotFound):
		return "not-found"
	case errors.Is(err, claimcheck.ErrUnavailable), errors.Is(err, claimcheck.ErrAccessDenied):
		return "store"
	}
	return ""
}

// replay is the dead-letter page's replay button: pipeline.Replay, the
// one `claimcheck dead replay` calls, then back to the page (POST, then a
// redirect, so reloading the page does not replay again).
func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	id, err := pipeline.ParseJobID(r.PathValue("id"))
	if err != nil {
		c.render(w, r, http.StatusBadRequest, "refused", page{Title: "Replay", Nav: "dead", Error: "not a job id"})
		return
	}
	target := fmt.Sprintf("%sdead?replayed=%d", PathPrefix, id)
	if _, err := c.o.Pipeline.Replay(r.Context(), id); err != nil {
		why := ReplayRefusal(err)
		if why == "" {
			c.failed(w, r, "dead", err)
			return
		}
		c.o.Logger.Info("console: replay refused", "job", id, "why", why, "err", err)
		target = fmt.Sprintf("%sdead?refused=%d&why=%s", PathPrefix, id, why)
	} else {
		c.o.Logger.Info("console: replayed", "job", id)
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// outbox shows each destination's depth and oldest entry.
func (c *Console) outbox(w http.ResponseWriter, r *http.Request) {
	stats, err := c.o.Pipeline.OutboxStats(r.Context())
	if err != nil {
		c.failed(w, r, "outbox", err)
		return
	}
	type outboxRow struct {
		pipeline.OutboxStats
		Age time.Duration
	}
	rows := make([]outboxRow, len(stats))
	for i, s := range stats {
		rows[i].OutboxStats = s
		if !s.Oldest.IsZero() {
			rows[i].Age = c.o.Now().Sub(s.Oldest)
		}
	}
	c.render(w, r, http.StatusOK, "outbox", page{Title: "Outbox", Nav: "outbox", Data: rows})
}

// storage shows the claims registry's objects and bytes per tenant.
func (c *Console) storage(w http.ResponseWriter, r *http.Request) {
	rows, err := c.o.Pipeline.StorageByTenant(r.Context())
	if err != nil {
		c.failed(w, r, "storage", err)
		return
	}
	c.render(w, r, http.StatusOK, "storage", page{Title: "Storage", Nav: "storage", Data: rows})
}

// doctor shows the doctor's checks (ops.Doctor) and the retention the
// deployment needs against the bucket's lifecycle. A GET only reads
// (ops.DoctorOptions.NoProbes): the checks that write probe objects are
// skipped. The page's POST (same-origin: the guard's
// CrossOriginProtection) runs them too; their probes are written under a
// reserved tenant and removed before the page is shown.
func (c *Console) doctor(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	probe := r.Method == http.MethodPost
	rep, err := ops.Doctor(ctx, ops.DoctorOptions{Pipeline: c.o.Pipeline, Retention: c.o.Retention, StoreURL: c.o.StoreURL, NoProbes: !probe})
	if err != nil {
		c.failed(w, r, "doctor", err)
		return
	}
	c.render(w, r, http.StatusOK, "doctor", page{Title: "Doctor", Nav: "doctor", Data: map[string]any{
		"Report": rep, "Failed": len(rep.Failed()), "Retention": c.o.Retention, "Lifetimes": c.lifetimes(ctx), "Probed": probe,
	}})
}

// lifetime is one prefix's retention: what the deployment needs against
// what the bucket's lifecycle gives.
type lifetime struct {
	Prefix        string
	Need          int
	Have          int
	Rule, Unknown string
	OK            bool
}

// lifetimes reads the bucket's lifecycle (ops.ExpiryDays, read-only) for
// payloads/ and results/ against the retention the deployment needs
// (`claimcheck retention`'s sum).
func (c *Console) lifetimes(ctx context.Context) []lifetime {
	st := c.o.Pipeline.Store()
	var out []lifetime
	for _, p := range []struct {
		prefix string
		need   int
	}{{claimcheck.PrefixPayloads, c.o.Retention.PayloadDays}, {claimcheck.PrefixResults, c.o.Retention.ResultDays}} {
		l := lifetime{Prefix: p.prefix, Need: p.need}
		days, rule, ok, err := ops.ExpiryDays(ctx, st, c.o.StoreURL, st.Namespace()+p.prefix)
		switch {
		case err != nil:
			l.Unknown = "cannot read the bucket's lifecycle configuration (" + claimcheck.Reason(err) + ")"
		case !ok:
			l.Unknown = "no lifecycle rule expires it here (a file store's sweeper expires it, or nothing does: the Doctor's expiry checks say which)"
		default:
			l.Have, l.Rule, l.OK = days, rule, days >= p.need
		}
		out = append(out, l)
	}
	return out
}

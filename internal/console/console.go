// Package console is claimcheck's web console, served by `claimcheck serve`
// at "/": River UI for the job engine under /riverui/, and server-rendered
// pages (html/template) for what River cannot know, under /console/:
//
//   - the overview: readiness (the checks /readyz asks), exact counts
//     (pipeline.Count), the queues by kind and dead letters by reason
//     (pipeline.QueueStats), the retention the deployment needs against
//     what the bucket's lifecycle gives (ops.ExpiryDays, read-only), where
//     the last sweep's orphans are reported, and the last hour's
//     throughput and queue depth (pipeline.Activity) as inline SVG charts
//     drawn on the server;
//   - jobs and dead letters, newest first, filtered by state, kind,
//     tenant, reason and time, each page with the exact number matching
//     and next/previous links (cursor paging by job id); dead letters say
//     whether their payload still exists, with a replay button that
//     refuses exactly as `claimcheck dead replay` does (both call
//     pipeline.Replay);
//   - a job's page: its ticket's fields, every attempt's error with its
//     reason, whether its payload and result still exist (the store's
//     existence check, no bytes read), and the trace it was enqueued
//     under;
//   - the outbox per destination, storage per tenant, and the doctor's
//     checks: read-only on GET, its probes run only by the page's POST.
//
// No page shows payload bytes, wrapped keys or full object keys: pages
// render tickets through pipeline.Redact, and River UI's API answers are
// rewritten through pipeline.RedactArgs and pipeline.RedactMetadata before
// they leave the process.
//
// Who may use it: a request from this host (a loopback peer address,
// 127.0.0.0/8 or ::1, naming a loopback host, so a page of another site
// whose name resolves to 127.0.0.1 is no way in) needs nothing more; any
// other needs a token the Gate accepts, sent as "Authorization: Bearer" or
// entered once on the login page (kept in an HttpOnly, SameSite=Strict
// cookie). Every state-changing request (replay, the doctor's probes,
// login, River UI's actions) must be same-origin: net/http's
// CrossOriginProtection refuses a cross-site POST by its Sec-Fetch-Site or
// Origin header.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Paths the console owns.
const (
	// PathPrefix starts claimcheck's own pages.
	PathPrefix = "/console/"
	// RiverUIPrefix is where River UI is mounted.
	RiverUIPrefix = "/riverui/"
)

// Gate decides who may use the console. The console asks Local first; a
// request that is not local must carry a token that Verify accepts.
type Gate interface {
	// Local reports whether r comes from this host and so needs no token.
	Local(r *http.Request) bool
	// Verify checks a token sent by a request that is not local. It
	// returns nil to let the request in, or an error saying why not (shown
	// to the user: it must hold no secret).
	Verify(ctx context.Context, token string) error
}

// Options configure Mount.
type Options struct {
	// Pipeline is the deployment's pipeline (job database and store).
	// Required.
	Pipeline *pipeline.Pipeline
	// Gate decides who may use the console. Required.
	Gate Gate
	// StoreURL is the --store URL as configured, which the doctor page
	// reads its scheme and bucket from (ops.DoctorOptions.StoreURL); it is
	// never shown.
	StoreURL string
	// Retention is what the deployment's objects must outlive, for the
	// doctor page. Required.
	Retention *claimcheck.Retention
	// Logger receives request errors (redacted, as every log line). nil:
	// discarded.
	Logger *slog.Logger
	// Now is the clock ages are measured with. nil: time.Now.
	Now func() time.Time
	// RowLimit is the most rows a page of jobs or dead letters shows; its
	// "next" and "previous" links page through the rest. Default 50.
	RowLimit int
	// Ready are the readiness checks the overview shows, the ones /readyz
	// asks (the job database, the stores, a broker). None: the overview
	// says none were given.
	Ready []ReadyCheck
}

// ReadyCheck is one dependency a readiness probe asks.
type ReadyCheck struct {
	// Name names the dependency: "database", "store", "broker".
	Name string
	// Check returns nil when the dependency is ready, else why not (shown:
	// it must hold no secret).
	Check func(context.Context) error
}

// Console is a mounted console.
type Console struct {
	o       Options
	pages   *template.Template
	riverUI http.Handler
	// RiverUIError is why River UI could not be mounted on this job
	// database, or nil when it runs.
	RiverUIError error
}

//go:embed templates/*.html static/*
var assets embed.FS

// Mount registers the console's routes on mux: "/" (exact), PathPrefix and
// RiverUIPrefix. River UI's background services run until ctx is done.
// When River UI cannot run on the job database, RiverUIPrefix serves a page
// saying why and Console.RiverUIError holds the error; claimcheck's own
// pages still work. Errors: claimcheck.ErrConfig for missing options.
func Mount(ctx context.Context, mux *http.ServeMux, o Options) (*Console, error) {
	if o.Pipeline == nil || o.Gate == nil || o.Retention == nil {
		return nil, fmt.Errorf("console: a pipeline, a gate and a retention are required: %w", claimcheck.ErrConfig)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RowLimit <= 0 {
		o.RowLimit = 50
	}
	t, err := template.New("").Funcs(funcs).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	c := &Console{o: o, pages: t}
	c.riverUI, c.RiverUIError = c.newRiverUI(ctx)
	if c.RiverUIError != nil {
		o.Logger.Warn("River UI cannot run on this job database; /riverui/ says why", "err", c.RiverUIError)
	}

	own := http.NewServeMux()
	own.HandleFunc("GET /{$}", c.overview)
	own.HandleFunc("GET "+PathPrefix+"{$}", c.overview)
	own.HandleFunc("GET "+PathPrefix+"jobs", c.jobs)
	own.HandleFunc("GET "+PathPrefix+"jobs/{id}", c.job)
	own.HandleFunc("GET "+PathPrefix+"dead", c.dead)
	own.HandleFunc("POST "+PathPrefix+"dead/{id}/replay", c.replay)
	own.HandleFunc("GET "+PathPrefix+"outbox", c.outbox)
	own.HandleFunc("GET "+PathPrefix+"storage", c.storage)
	own.HandleFunc("GET "+PathPrefix+"doctor", c.doctor)
	own.HandleFunc("POST "+PathPrefix+"doctor", c.doctor)
	own.HandleFunc("GET "+PathPrefix+"login", c.loginForm)
	own.HandleFunc("POST "+PathPrefix+"login", c.login)
	own.Handle("GET "+PathPrefix+"static/", http.StripPrefix(PathPrefix, http.FileServerFS(assets)))
	own.Handle(RiverUIPrefix, c.riverUI)

	h := c.guard(own)
	mux.Handle("/{$}", h)
	mux.Handle(PathPrefix, h)
	mux.Handle(RiverUIPrefix, h)
	return c, nil
}

// errEnough stops a listing at the page's row limit.
var errEnough = errors.New("enough rows")

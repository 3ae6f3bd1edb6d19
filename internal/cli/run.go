package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/internal/corpus"
	"github.com/claimcheck/claimcheck/internal/pdfinfo"
	"github.com/claimcheck/claimcheck/pipeline"
)

type runJob struct {
	ID          int64  `json:"id"`
	File        string `json:"file"`
	Size        int64  `json:"size"`
	Inline      bool   `json:"inline"`
	TicketBytes int    `json:"ticket_bytes"`
	State       string `json:"state"`
	Attempts    int    `json:"attempts"`
	Reason      string `json:"reason,omitempty"`
	Pages       int    `json:"pages,omitempty"`
	argsBytes   int
	key         string
}

type runSummary struct {
	Jobs              int     `json:"jobs"`
	Done              int     `json:"done"`
	Dead              int     `json:"dead"`
	Other             int     `json:"other"`
	Inline            int     `json:"inline"`
	Offloaded         int     `json:"offloaded"`
	TicketMinBytes    int     `json:"ticket_min_bytes"`
	TicketMaxBytes    int     `json:"ticket_max_bytes"`
	OffloadedMinBytes int     `json:"offloaded_ticket_min_bytes"`
	OffloadedMaxBytes int     `json:"offloaded_ticket_max_bytes"`
	InlineMinBytes    int     `json:"inline_ticket_min_bytes"`
	InlineMaxBytes    int     `json:"inline_ticket_max_bytes"`
	ObjectStoreBytes  int64   `json:"object_store_bytes"`
	JobDatabaseBytes  int64   `json:"job_database_bytes"`
	PayloadBytes      int64   `json:"payload_bytes"`
	ElapsedSeconds    float64 `json:"elapsed_seconds"`
	// Broker is the broker the jobs went through (password hidden), with
	// its outbox destination; empty for the job database's queue.
	Broker string `json:"broker,omitempty"`
}

// runOptions are the options of run.
type runOptions struct {
	g           *globals
	tenant      string
	concurrency int
	args        []string // the files and directories (at least one: Args)
}

// Validate checks the tenant.
func (o *runOptions) Validate() error {
	if err := claimcheck.ValidateTenant(o.tenant); err != nil {
		return usagef("--tenant: %v", err)
	}
	return nil
}

func newRun(g *globals) *cobra.Command {
	o := &runOptions{g: g}
	c := &cobra.Command{
		Use:   "run [FILES|DIRS...]",
		Short: "The main job: submit PDF documents and work them end to end (kind pdf-info)",
		Long: `Submit every file named, and every *.pdf file under each directory named, as a
pdf-info job; work them in this process with the built-in handler (page count
and metadata, through pdfcpu), storing a JSON result per document; then print
a table of the jobs and a summary.

With no arguments it runs the bundled corpus, testdata/pdf of a claimcheck
clone (run from the clone's root): five real PDFs and big.pdf, a 43 MiB
document merged from them the first time (the module does not ship it).

With --broker, the jobs go through the outbox to the broker instead: this
process relays them, consumes them from the broker with the same handler, and
records each outcome in the job database's inbox.`,
		RunE: runE(o, func(_ *cobra.Command, args []string) { o.args = args }),
	}
	c.Flags().StringVar(&o.tenant, "tenant", "local", "tenant owning the documents")
	c.Flags().IntVar(&o.concurrency, "concurrency", 2, "jobs worked at once")
	return c
}

// runBroker relays and consumes until every job of run has a final outcome
// (Pipeline.UntilFinished).
func runBroker(ctx context.Context, stderr io.Writer, g *globals, e *env, tr broker.Transport, handlers map[string]claimcheck.Handler, concurrency int, jobs []*runJob) error {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	logger, err := g.logger()
	if err != nil {
		return err
	}
	src := brokerSource(g, tr, stderr, true)
	src.Until = e.pipe.UntilFinished(ids...)
	return e.pipe.Work(ctx, pipeline.WorkOptions{Handlers: handlers, Concurrency: concurrency, Broker: src,
		Notify: func(msg string) { fmt.Fprintln(stderr, msg) },
		OnDone: func(o pipeline.Outcome) {
			if o.Err != nil && !logsAttempt(logger, o.State) {
				fmt.Fprintf(stderr, "job %d%s: attempt %d failed (%s), %s: %v\n", o.JobID, messageNote(o.MessageID), o.Attempt, o.Reason, o.State, o.Err)
			}
		}})
}

// corpusDir is run's default argument: testdata/pdf of a claimcheck clone,
// the working directory being its root, with its big.pdf made on first use
// (corpus.EnsureBig), saying so on stderr since it takes a while. Where the
// go command is missing, run goes on without big.pdf and says so.
func corpusDir(stderr io.Writer) (string, error) {
	dir := corpus.Dir
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		return "", usagef("run needs files or directories (e.g. claimcheck run ./docs/*.pdf); with none it runs the corpus in testdata/pdf of a claimcheck clone, and %s is not one", filepath.Join(".", dir))
	}
	big := filepath.Join(dir, corpus.BigName)
	if _, err := os.Stat(big); err != nil {
		fmt.Fprintf(stderr, "making %s from the corpus (first run only, about a minute)...\n", big)
		if _, err := corpus.EnsureBig(".", dir); errors.Is(err, corpus.ErrNoGo) {
			fmt.Fprintf(stderr, "claimcheck: warning: %v: running the corpus without %s\n", err, big)
		} else if err != nil {
			return "", fmt.Errorf("run: %w", err)
		}
	}
	return dir, nil
}

// collectFiles expands the arguments: files as named, directories walked for
// *.pdf files, all sorted. A missing, unreadable or empty argument is a
// usage error (exit 2) before anything is submitted.
func collectFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, usagef("cannot read %s: %v", a, unwrapPath(err))
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && strings.EqualFold(filepath.Ext(p), ".pdf") {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, usagef("cannot read directory %s: %v", a, unwrapPath(err))
		}
		if len(found) == 0 {
			return nil, usagef("no *.pdf files under %s", a)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, usagef("cannot read %s: %v", f, unwrapPath(err))
		}
		st, err := fh.Stat()
		fh.Close()
		switch {
		case err != nil:
			return nil, usagef("cannot read %s: %v", f, unwrapPath(err))
		case !st.Mode().IsRegular():
			return nil, usagef("cannot read %s: not a regular file", f)
		case st.Size() == 0:
			return nil, usagef("%s is empty: an empty file is not a PDF; nothing was submitted", f)
		}
	}
	return files, nil
}

// brokerAt is the outbox entries' broker binding (EnqueueOptions.Broker).
func submitFile(ctx context.Context, stdin io.Reader, e *env, tenant, path string, stderr io.Writer, dests []string, brokerAt string) (*runJob, error) {
	in, ct, size, closeIn, err := openInput(stdin, path)
	if err != nil {
		return nil, err
	}
	defer closeIn()
	opts := &pipeline.EnqueueOptions{CheckIn: claimcheck.CheckInOptions{ContentType: ct}, Destinations: dests}
	if dests != nil {
		opts.Broker = brokerAt
	}
	bar := newCheckInProgress(stderr, size, filepath.Base(path))
	if bar != nil {
		opts.CheckIn.Progress = bar.progress
	}
	res, err := e.pipe.Enqueue(ctx, pdfinfo.Kind, tenant, in, opts)
	bar.done(err)
	if err != nil {
		return nil, fmt.Errorf("submit %s: %w", path, err)
	}
	return &runJob{ID: res.JobID, File: path, Size: res.Ticket.Size, Inline: res.Ticket.IsInline(), TicketBytes: res.TicketBytes, key: res.Ticket.Key}, nil
}

// summarise reads each job's outcome (for a broker job, its consumer's, from
// the inbox) and totals them.
func summarise(ctx context.Context, e *env, jobs []*runJob, elapsed time.Duration) (*runSummary, error) {
	s := &runSummary{Jobs: len(jobs), ElapsedSeconds: elapsed.Seconds()}
	objects := map[string]int64{}
	for i, j := range jobs {
		info, err := e.pipe.Get(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		j.State, j.Attempts, j.Reason, j.argsBytes = info.State, info.Attempts, info.Reason, info.ArgsBytes
		switch {
		case info.State == string(pipeline.JobCompleted):
			s.Done++
		case info.Dead:
			s.Dead++
		default:
			s.Other++
		}
		if j.Inline {
			s.Inline++
			s.InlineMinBytes = minPositive(s.InlineMinBytes, j.TicketBytes)
			s.InlineMaxBytes = max(s.InlineMaxBytes, j.TicketBytes)
		} else {
			s.Offloaded++
			objects[j.key] = j.Size
			s.OffloadedMinBytes = minPositive(s.OffloadedMinBytes, j.TicketBytes)
			s.OffloadedMaxBytes = max(s.OffloadedMaxBytes, j.TicketBytes)
		}
		if i == 0 || j.TicketBytes < s.TicketMinBytes {
			s.TicketMinBytes = j.TicketBytes
		}
		s.TicketMaxBytes = max(s.TicketMaxBytes, j.TicketBytes)
		s.JobDatabaseBytes += int64(info.ArgsBytes)
		s.PayloadBytes += j.Size
		if rt := info.ResultTicket(); rt != nil {
			if !rt.IsInline() {
				objects[rt.Key] = rt.Size
			}
			j.Pages = resultPages(ctx, e, rt)
		}
	}
	for _, n := range objects {
		s.ObjectStoreBytes += n
	}
	return s, nil
}

// minPositive is the smaller of a and b, treating 0 as unset.
func minPositive(a, b int) int {
	if a == 0 {
		return b
	}
	return min(a, b)
}

// resultPages reads the page count from a job's verified JSON result.
func resultPages(ctx context.Context, e *env, rt *claimcheck.Ticket) int {
	p, err := e.store.Claim(rt)
	if err != nil {
		return 0
	}
	defer p.Close()
	r, err := p.Open(ctx)
	if err != nil {
		return 0
	}
	defer r.Close()
	var info pdfinfo.Info
	if json.NewDecoder(r).Decode(&info) != nil {
		return 0
	}
	return info.PageCount
}

func printRun(w io.Writer, jobs []*runJob, s *runSummary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "JOB\tSIZE (B)\tPLACEMENT\tTICKET (B)\tSTATE\tATTEMPTS\tPAGES\tFILE\t")
	for _, j := range jobs {
		state := j.State
		if j.Reason != "" {
			state += " (" + j.Reason + ")"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%d\t%d\t%s\t\n", j.ID, j.Size, placement(j.Inline), j.TicketBytes, state, j.Attempts, j.Pages, j.File)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "jobs\t%d done, %d dead, %d other (of %d)\n", s.Done, s.Dead, s.Other, s.Jobs)
	fmt.Fprintf(tw, "placement\t%d inline, %d offloaded\n", s.Inline, s.Offloaded)
	fmt.Fprintf(tw, "ticket size\tmin %d B, max %d B\n", s.TicketMinBytes, s.TicketMaxBytes)
	fmt.Fprintf(tw, "  offloaded\tmin %d B, max %d B (budget %d B whatever the payload)\n", s.OffloadedMinBytes, s.OffloadedMaxBytes, claimcheck.MaxTicketBytes)
	fmt.Fprintf(tw, "  inline\tmin %d B, max %d B (they carry the payload)\n", s.InlineMinBytes, s.InlineMaxBytes)
	fmt.Fprintf(tw, "payload bytes\t%d\n", s.PayloadBytes)
	fmt.Fprintf(tw, "object storage\t%d B\n", s.ObjectStoreBytes)
	fmt.Fprintf(tw, "job database\t%d B (job arguments)\n", s.JobDatabaseBytes)
	if s.Broker != "" {
		fmt.Fprintf(tw, "queue\tbroker %s\n", s.Broker)
	} else {
		fmt.Fprintf(tw, "queue\tthe job database's\n")
	}
	fmt.Fprintf(tw, "elapsed\t%.2f s\n", s.ElapsedSeconds)
	tw.Flush()
}

func (o *runOptions) run(ctx context.Context, s streams) error {
	g, args := o.g, o.args
	if len(args) == 0 {
		dir, err := corpusDir(s.err)
		if err != nil {
			return err
		}
		args = []string{dir}
	}
	files, err := collectFiles(args)
	if err != nil {
		return err
	}
	e, err := g.open(ctx, openOptions{memOK: true}) // submits and works in this one process
	if err != nil {
		return err
	}
	defer e.Close()
	start := time.Now()
	stderr := s.err
	var tr broker.Transport
	var dests []string
	if g.brokerURL != "" {
		if tr, err = g.openBroker(ctx, e, pdfinfo.Kind); err != nil {
			return err
		}
		defer tr.Close()
		dests = []string{g.destination}
	}
	jobs := make([]*runJob, 0, len(files))
	for _, f := range files {
		j, err := submitFile(ctx, s.in, e, o.tenant, f, stderr, dests, g.brokerBinding())
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
	}
	handlers := map[string]claimcheck.Handler{pdfinfo.Kind: pdfinfo.Handler()}
	if tr != nil {
		err = runBroker(ctx, stderr, g, e, tr, handlers, o.concurrency, jobs)
	} else {
		err = e.pipe.Work(ctx, pipeline.WorkOptions{Handlers: handlers, Concurrency: o.concurrency, UntilEmpty: true})
	}
	if cerr := ctx.Err(); cerr != nil {
		resume := ""
		if tr != nil {
			resume = "--broker URL "
		}
		return fmt.Errorf("interrupted; jobs stay queued, resume with: claimcheck %swork --kind %s --until-empty", resume, pdfinfo.Kind)
	}
	if err != nil {
		return err
	}
	sum, err := summarise(ctx, e, jobs, time.Since(start))
	if err != nil {
		return err
	}
	if tr != nil {
		sum.Broker = g.redactedBroker() + " (destination " + g.destination + ")"
	}
	if g.json {
		return printJSON(s.out, map[string]any{"jobs": jobs, "summary": sum})
	}
	printRun(s.out, jobs, sum)
	if sum.Dead > 0 || sum.Other > 0 {
		return fmt.Errorf("%d of %d jobs did not complete (see: claimcheck dead)", sum.Dead+sum.Other, sum.Jobs)
	}
	return nil
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/sweep"
)

// sweepSummary is the last part of sweep --json.
type sweepSummary struct {
	DryRun       bool                 `json:"dry_run"`
	Grace        string               `json:"grace"`
	Prefixes     []string             `json:"prefixes"`
	Expiry       map[string]string    `json:"expiry,omitempty"`
	Listed       int                  `json:"listed"`
	Removed      int                  `json:"removed"`
	RemovedBytes int64                `json:"removed_bytes"`
	Kept         int                  `json:"kept"`
	ByReason     map[sweep.Reason]int `json:"by_reason"`
	RemovedBy    map[sweep.Reason]int `json:"removed_by_reason"`
	Pages        int                  `json:"pages"`
	Queries      int                  `json:"registry_queries"`
	// InboxPruned counts the broker inbox's records forgot (--inbox-retention).
	InboxPruned int64  `json:"inbox_pruned"`
	Elapsed     string `json:"elapsed"`
	Error       string `json:"error,omitempty"`
}

// sweepOptions are the options of sweep.
type sweepOptions struct {
	reader
	dryRun, reveal, allowEmpty     bool
	grace, expPayloads, expResults string
	inboxRetention, pointerRet     string
	pageSize                       int
	opts                           sweep.Options // the flags parsed by Validate
	inboxAge                       time.Duration // --inbox-retention parsed by Validate
}

// Validate parses --grace (at least sweep.MinGrace), --page-size and the
// expiries (none shorter than the grace).
func (o *sweepOptions) Validate() error {
	opts := sweep.Options{DryRun: o.dryRun, PageSize: o.pageSize, AllowEmptyRegistry: o.allowEmpty, Expiry: map[string]time.Duration{}}
	var err error
	if opts.Grace, err = claimcheck.ParseDuration(o.grace); err != nil {
		return usagef("--grace: %v", err)
	}
	if opts.Grace < sweep.MinGrace {
		return usagef("--grace %s is below the minimum of %s: an upload whose transaction has not committed yet would be deleted", o.grace, claimcheck.FormatDuration(sweep.MinGrace))
	}
	if o.pointerRet != "" {
		if opts.PointerRetention, err = claimcheck.ParseDuration(o.pointerRet); err != nil {
			return usagef("--pointer-retention: %v", err)
		}
		if opts.PointerRetention < opts.Grace {
			return usagef("--pointer-retention %s is shorter than --grace %s", o.pointerRet, o.grace)
		}
	}
	if o.pageSize < 1 || o.pageSize > sweep.MaxPageSize {
		return usagef("--page-size %d: use 1 to %d", o.pageSize, sweep.MaxPageSize)
	}
	for _, f := range []struct{ flag, val, prefix string }{
		{"--expire-payloads", o.expPayloads, claimcheck.PrefixPayloads},
		{"--expire-results", o.expResults, claimcheck.PrefixResults},
	} {
		if f.val == "" {
			continue
		}
		d, err := claimcheck.ParseDuration(f.val)
		if err != nil {
			return usagef("%s: %v", f.flag, err)
		}
		if d < opts.Grace {
			return usagef("%s %s is shorter than the grace period (%s)", f.flag, f.val, claimcheck.FormatDuration(opts.Grace))
		}
		opts.Expiry[f.prefix] = d
	}
	if o.inboxRetention != "" {
		if o.inboxAge, err = claimcheck.ParseDuration(o.inboxRetention); err != nil {
			return usagef("--inbox-retention: %v", err)
		}
	}
	o.opts = opts
	return nil
}

// opening: sweep --dry-run only lists and reads, so it writes nothing.
func (o *sweepOptions) opening() (*globals, openOptions) {
	return o.g, openOptions{readOnly: true, noWrites: o.dryRun}
}

func newSweep(g *globals) *cobra.Command {
	o := &sweepOptions{reader: reader{g}}
	c := &cobra.Command{
		Use:   "sweep [--dry-run] [--grace 24h] [--expire-payloads 22d --expire-results 60d]",
		Short: "Delete orphaned objects (and expired ones, for stores without lifecycle rules)",
		Long: `Delete objects under payloads/ and results/ that no claims-registry row refers
to and that are older than the grace period (default 24h: an upload whose
transaction has not committed yet is never touched). Prints every object it
removed and kept, and why; --dry-run deletes nothing and prints the same.

Never deleted: an object a job refers to (queued, running, retrying, dead,
completed, or already pruned by River), an object a producer is still
checking in (a live check-in intent, timed by the job database's clock), an
object younger than the grace period, anything outside payloads/ and
results/. Ages are measured against the store's own clock (the S3 server's,
this host's for a file store), never this process's.

Also removed, as litter of check-ins killed mid-write: a file store's
temporary files (*.tmp) older than the grace period, and, on S3, incomplete
multipart uploads under payloads/ and results/ begun more than the grace
period ago (aborted, their parts freed). Both are listed, and so is each
check-in intent of such a check-in (stale-intent: an intent older than the
grace period, by the job database's clock, whose object does not exist),
which is removed from the job database.

--expire-payloads and --expire-results enforce lifecycle expiry where the
store has no lifecycle engine (the file store): an older object is deleted
even with a registry row, unless a job referring to it is still pending or
dead. An expiry shorter than the dead-letter retention is refused; see
"claimcheck retention" for the minimum.

The broker inbox's records of messages settled longer ago than
--inbox-retention (default: the results' retention, "claimcheck retention";
at least the dead-letter retention) are forgotten: by then their payloads
and results have expired. A dry run keeps them.

Object keys show as tenant prefix and digest prefix; --reveal shows them in
full. The sweep works a page of objects at a time (--page-size), so its
memory does not grow with the bucket.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, nil),
	}
	f := c.Flags()
	f.BoolVar(&o.dryRun, "dry-run", false, "decide and print everything, delete nothing")
	f.StringVar(&o.grace, "grace", claimcheck.FormatDuration(sweep.DefaultGrace), "an unreferenced object younger than this is left alone (at least 1h)")
	f.StringVar(&o.expPayloads, "expire-payloads", "", "also delete payloads older than this unless a pending or dead job refers to them (file stores: no lifecycle engine)")
	f.StringVar(&o.expResults, "expire-results", "", "the same for results")
	f.StringVar(&o.inboxRetention, "inbox-retention", "",
		"forget the broker inbox's record of a message settled longer ago than this (default: the results' retention, \"claimcheck retention\"; at least the dead-letter retention)")
	f.StringVar(&o.pointerRet, "pointer-retention", "",
		"keep an AWS payload pointer's per-message copy (payloads/<tenant>/pointer/…) this long, then delete it (default "+claimcheck.FormatDuration(sweep.DefaultPointerRetention)+", SQS's longest message retention)")
	f.IntVar(&o.pageSize, "page-size", sweep.DefaultPageSize, "objects listed and looked up at a time")
	f.BoolVar(&o.reveal, "reveal", false, "show full object keys (they can encode tenant and content identity)")
	f.BoolVar(&o.allowEmpty, "allow-empty-registry", false, "sweep even though no job was ever registered (otherwise refused: usually the wrong --database)")
	return c
}

// sweepPrinter writes each decision as it is made: a line of text, or an
// element of the JSON entries array, so nothing accumulates in memory.
type sweepPrinter struct {
	w                    io.Writer
	json, reveal, dryRun bool
	n                    int
	store                string // the store's name when several are swept
}

func (p *sweepPrinter) start() {
	if p.json {
		if p.store != "" {
			fmt.Fprintf(p.w, "{\n\"store\": %q,", p.store)
		} else {
			fmt.Fprint(p.w, "{")
		}
		fmt.Fprintf(p.w, "\n\"entries\": [")
		return
	}
	fmt.Fprintf(p.w, "%-12s  %-12s  %9s  %8s  %-36s  %s\n", "ACTION", "REASON", "SIZE", "AGE", "OBJECT", "WHY")
}

func (p *sweepPrinter) entry(e sweep.Entry) error {
	p.n++
	if !p.reveal {
		e.Key = ""
	}
	if p.json {
		sep := ",\n"
		if p.n == 1 {
			sep = "\n"
		}
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s%s", sep, b)
		return err
	}
	action := "kept"
	if e.Removed {
		action = "removed"
		if p.dryRun {
			action = "would remove"
		}
	}
	obj := e.Object
	if p.reveal {
		obj = e.Key
	}
	age := "-"
	if !e.ModTime.IsZero() {
		age = claimcheck.FormatDuration(e.Age.Truncate(time.Minute))
	}
	_, err := fmt.Fprintf(p.w, "%-12s  %-12s  %9s  %8s  %-36s  %s\n", action, e.Reason, byteSize(e.Size), age, obj, e.Detail)
	return err
}

func (p *sweepPrinter) finish(rep *sweep.Report, inboxPruned int64, err error) {
	s := sweepSummary{InboxPruned: max(inboxPruned, 0), DryRun: rep.DryRun, Grace: claimcheck.FormatDuration(rep.Grace), Prefixes: rep.Prefixes, Listed: rep.Listed,
		Removed: rep.Removed, RemovedBytes: rep.RemovedBytes, Kept: rep.Kept, ByReason: rep.ByReason, RemovedBy: rep.RemovedByReason, Pages: rep.Pages, Queries: rep.Queries,
		Elapsed: rep.Elapsed.Round(time.Millisecond).String()}
	if len(rep.Expiry) > 0 {
		s.Expiry = map[string]string{}
		for k, v := range rep.Expiry {
			s.Expiry[k] = claimcheck.FormatDuration(v)
		}
	}
	if err != nil {
		s.Error = err.Error()
	}
	if p.json {
		b, _ := json.MarshalIndent(s, "", "  ")
		fmt.Fprintf(p.w, "\n],\n\"summary\": %s\n}", b)
		if p.store == "" {
			fmt.Fprintln(p.w)
		}
		return
	}
	verb, keep := "removed", "kept"
	if rep.DryRun {
		verb, keep = "dry run: would remove", "would keep"
	}
	var kept, removed []string
	for _, r := range sweep.SortedReasons(rep.ByReason) {
		if n := rep.ByReason[r] - rep.RemovedByReason[r]; n > 0 {
			kept = append(kept, fmt.Sprintf("%s %d", r, n))
		}
		if n := rep.RemovedByReason[r]; n > 0 {
			removed = append(removed, fmt.Sprintf("%s %d", r, n))
		}
	}
	removedText := byteSize(rep.RemovedBytes)
	if len(removed) > 0 {
		removedText = strings.Join(removed, ", ") + "; " + removedText
	}
	keptText := ""
	if len(kept) > 0 {
		keptText = " (" + strings.Join(kept, ", ") + ")"
	}
	fmt.Fprintf(p.w, "\n%s %s (%s), %s %s%s; listed %d under %s in %d pages\n",
		verb, objects(rep.Removed), removedText, keep, objects(rep.Kept), keptText,
		rep.Listed, strings.Join(rep.Prefixes, " and "), rep.Pages)
	if !rep.DryRun && err == nil && inboxPruned >= 0 {
		fmt.Fprintf(p.w, "inbox: forgot %s settled before the inbox retention\n", count(inboxPruned, "broker message"))
	}
	if err != nil {
		fmt.Fprintf(p.w, "stopped early: %v\n", err)
	}
}

func (o *sweepOptions) runIn(ctx context.Context, s streams, e *env) error {
	g, opts := o.g, o.opts
	if d, ok := opts.Expiry[claimcheck.PrefixPayloads]; ok && d < e.pipe.DeadLetterRetention() {
		return usagef("--expire-payloads %s is shorter than the dead-letter retention (%s): payloads of replayable dead letters would expire; \"claimcheck retention\" computes the minimum",
			o.expPayloads, claimcheck.FormatDuration(e.pipe.DeadLetterRetention()))
	}
	inboxAge := o.inboxAge
	if inboxAge == 0 {
		r, err := defaultRetention(g)
		if err != nil {
			return err
		}
		inboxAge = time.Duration(r.ResultDays) * 24 * time.Hour
	}
	if inboxAge < e.pipe.DeadLetterRetention() {
		return usagef("--inbox-retention %s is shorter than the dead-letter retention (%s): a replayable broker dead letter would lose its record",
			claimcheck.FormatDuration(inboxAge), claimcheck.FormatDuration(e.pipe.DeadLetterRetention()))
	}
	// Each configured store is swept in turn (--store NAME=URL), each
	// with its own table and summary, headed by its name when there are
	// several; --json then prints {"stores": [{"store": NAME, "entries":
	// …, "summary": …}, …]}.
	several := len(e.stores) > 1
	if several && g.json {
		fmt.Fprint(s.out, "{\"stores\": [\n")
	}
	var firstErr error
	for i, st := range e.stores {
		opts.Store, opts.DB = st, e.pipe.DB()
		p := &sweepPrinter{w: s.out, json: g.json, reveal: o.reveal, dryRun: o.dryRun}
		if several {
			p.store = e.specs[i].label()
			if g.json && i > 0 {
				fmt.Fprint(s.out, ",\n")
			} else if !g.json {
				if i > 0 {
					fmt.Fprintln(s.out)
				}
				fmt.Fprintf(s.out, "store %s (%s)\n", p.store, st.Location())
			}
		}
		opts.OnEntry = p.entry
		p.start()
		rep, err := sweep.Sweep(ctx, opts)
		if rep == nil { // refused before it began
			if several && g.json {
				fmt.Fprint(s.out, "\n]}\n")
			}
			return err
		}
		// The inbox's records of settled broker messages go once the
		// payloads and results they could concern have expired
		// (Pipeline.PruneInbox), after the last store's sweep.
		pruned := int64(-1) // not this store's: said after the last
		if i == len(e.stores)-1 {
			pruned = 0
		}
		if err == nil && !o.dryRun && pruned == 0 && firstErr == nil {
			pruned, err = e.pipe.PruneInbox(ctx, time.Now().Add(-inboxAge))
		}
		p.finish(rep, pruned, err)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if err != nil && ctx.Err() != nil {
			break
		}
	}
	if several && g.json {
		fmt.Fprint(s.out, "]}\n")
	}
	return firstErr
}

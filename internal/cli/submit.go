package cli

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/pipeline"
)

// submitted is what submit prints.
type submitted struct {
	ID          int64  `json:"id"`
	Duplicate   bool   `json:"duplicate"`
	Kind        string `json:"kind"`
	Tenant      string `json:"tenant"`
	Inline      bool   `json:"inline"`
	TicketBytes int    `json:"ticket_bytes"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256_prefix"`
	Priority    int    `json:"priority"`
	// Attachments are the job's attachments' names, in order (--attach).
	Attachments []string `json:"attachments,omitempty"`
	// Store is the named store the job's documents went to (--store-name,
	// or the first named --store when none is unnamed); empty for the
	// default store.
	Store string `json:"store,omitempty"`
}

// submitOptions are the options of submit.
type submitOptions struct {
	g                                              *globals
	kind, tenant, idem, contentType, name, version string
	allowEmpty, strict                             bool
	priority                                       int
	storeName                                      string   // --store-name
	prioritySet                                    bool     // --priority was given
	file                                           string   // FILE or "-"; "" for none (only with --attach)
	attach                                         []string // --attach NAME=FILE, as given
	attachments                                    []attachArg
}

// attachArg is one --attach NAME=FILE, parsed by Validate.
type attachArg struct{ name, file string }

// Validate checks the kind, tenant and priority.
func (o *submitOptions) Validate() error {
	if o.kind == "" || o.tenant == "" {
		return usagef("submit needs --kind and --tenant")
	}
	if err := pipeline.ValidateKind(o.kind); err != nil {
		return usagef("%v", err)
	}
	if err := claimcheck.ValidateTenant(o.tenant); err != nil {
		return usagef("--tenant: %v", err)
	}
	if err := o.parseAttachments(); err != nil {
		return err
	}
	if o.storeName != "" {
		if err := pipeline.ValidateStoreName(o.storeName); err != nil {
			return usagef("--store-name: %v", err)
		}
	}
	if !o.prioritySet {
		return nil
	}
	if o.priority == 0 {
		return usagef("--priority 0: use %d (highest) to %d (lowest)", pipeline.HighestPriority, pipeline.LowestPriority)
	}
	if err := pipeline.ValidatePriority(o.priority); err != nil {
		return usagef("--priority: %v", err)
	}
	return nil
}

// parseAttachments parses each --attach NAME=FILE: names as
// claimcheck.ValidateAttachmentNames (unique, no path separators, no ".."),
// FILE a path (standard input is the main payload's).
func (o *submitOptions) parseAttachments() error {
	o.attachments = o.attachments[:0]
	names := make([]string, 0, len(o.attach))
	for _, a := range o.attach {
		name, file, ok := strings.Cut(a, "=")
		if !ok || file == "" {
			return usagef("--attach %q: give NAME=FILE", a)
		}
		if file == "-" {
			return usagef("--attach %s=-: standard input is the main payload's (FILE); give an attachment a file", name)
		}
		if err := claimcheck.ValidateAttachmentName(name); err != nil {
			return usagef("--attach: %v", err)
		}
		names = append(names, name)
		o.attachments = append(o.attachments, attachArg{name: name, file: file})
	}
	if len(names) > 0 {
		if err := claimcheck.ValidateAttachmentNames(names); err != nil {
			return usagef("--attach: %v", err)
		}
	}
	if o.file == "" && len(names) == 0 {
		return usagef("expected FILE or -, got 0 arguments")
	}
	return nil
}

// submitArgs: FILE or -, which --attach makes optional.
func submitArgs(cmd *cobra.Command, args []string) error {
	attach, _ := cmd.Flags().GetStringArray("attach")
	if len(args) > 1 || len(args) == 0 && len(attach) == 0 {
		return usagef("expected FILE or -, got %d arguments", len(args))
	}
	return nil
}

func newSubmit(g *globals) *cobra.Command {
	o := &submitOptions{g: g}
	c := &cobra.Command{
		Use:   "submit --kind K --tenant T [--idempotency-key X] [--priority N] [--attach NAME=FILE]... [--store-name NAME] [FILE|-]",
		Short: "Check a payload in and enqueue one job carrying its ticket",
		Long: `Check a payload in (a file, or standard input with "-") and enqueue one job of
kind K for tenant T. The payload is stored before the job exists. With an
idempotency key, submitting again returns the first job and stores nothing new.

With --broker, the broker URL is checked first (a wrong one is refused with
nothing stored), the job goes into the outbox of --destination in the same
transaction as its registry row, and submit then relays the outbox to the
broker for up to 15 seconds; what the broker does not confirm by then, or
everything if it is unreachable, stays in the outbox for relay, work or run
--broker to send.

--priority 1 (highest, the default) to 4 (lowest): of the waiting jobs of a
kind, workers take the highest priority first. With --broker it needs a
broker queue with priorities (RabbitMQ with max_priority=4 in the URL); SQS
and NATS JetStream have no message priorities, so --priority is refused there
(and while the broker is unreachable) with nothing stored.

--attach NAME=FILE (repeatable, up to 32) adds a named document to the job:
each is checked in like a payload, then a manifest listing them, whose
ticket the job carries (at most 512 bytes however many there are). The job
is enqueued only once all are stored, and not at all if one fails. FILE is
then optional (a job of attachments only). Names are plain file names:
A-Z, a-z, 0-9, '.', '_', '-', '+', at most 64 bytes, no path separators,
no "..", not starting with '.', each given once.

--store-name NAME sends the payload, its attachments and later its result
to the store configured as --store NAME=URL (default: the unnamed --store,
or the first --store when every one is named); only workers that have that
store take the job.`,
		Args: submitArgs,
		RunE: runE(o, func(cmd *cobra.Command, args []string) {
			o.file, o.prioritySet = "", cmd.Flags().Changed("priority")
			if len(args) > 0 {
				o.file = args[0]
			}
		}),
	}
	c.Flags().StringVar(&o.kind, "kind", "", "job kind (required)")
	c.Flags().StringVar(&o.tenant, "tenant", "", "tenant owning the payload (required)")
	c.Flags().StringVar(&o.idem, "idempotency-key", "", "a second submit with the same kind, tenant and key returns the first job")
	c.Flags().StringVar(&o.contentType, "content-type", "", "payload media type (default: from the file extension)")
	c.Flags().StringVar(&o.name, "name", "", "store under this stable business key instead of the content address")
	c.Flags().StringVar(&o.version, "version", "", "version of a named payload that legitimately changes")
	c.Flags().BoolVar(&o.strict, "strict", false, "refuse to start (exit 2) when the bucket's lifecycle expires payloads/ or results/ sooner than claimcheck retention requires (default: a warning on standard error)")
	c.Flags().BoolVar(&o.allowEmpty, "allow-empty", false, "accept an empty (0-byte) payload")
	c.Flags().StringArrayVar(&o.attach, "attach", nil, "attach a named document, NAME=FILE (repeatable): the handler gets it by name, an --exec command in $CLAIMCHECK_ATTACHMENTS_DIR/NAME")
	c.Flags().StringVar(&o.storeName, "store-name", "", "the store the payload goes to, one configured with --store NAME=URL (default: the default store); only workers with that store take the job")
	c.Flags().IntVar(&o.priority, "priority", pipeline.DefaultPriority, "job priority, 1 (highest) to 4 (lowest); with --broker only on a queue with priorities (RabbitMQ max_priority=4)")
	return c
}

func (o *submitOptions) run(ctx context.Context, s streams) error {
	g := o.g
	priority := 0 // the pipeline's default unless --priority is given
	if o.prioritySet {
		priority = o.priority
	}
	var in io.Reader
	var ct string
	fileSize := int64(-1) // of the main payload: -1 for standard input or none
	if o.file != "" {
		r, t, size, closeIn, err := openInput(s.in, o.file)
		if err != nil {
			return err
		}
		defer closeIn()
		in, ct, fileSize = r, t, size
	}
	// Every attachment is opened before anything is stored.
	var atts []pipeline.Attachment
	for _, a := range o.attachments {
		r, t, size, closeAtt, err := openInput(nil, a.file)
		if err != nil {
			return fmt.Errorf("--attach %s: %w", a.name, err)
		}
		defer closeAtt()
		if !o.allowEmpty {
			if r, err = refuseEmpty(r, a.file, size); err != nil {
				return usagef("--attach %s=%s: %v; nothing was stored", a.name, a.file, errEmptyPayload)
			}
		}
		atts = append(atts, pipeline.Attachment{Name: a.name, Body: r, ContentType: t})
	}
	contentType := o.contentType
	if contentType == "" {
		contentType = ct
	}
	// An empty payload is refused before anything is opened or made: a
	// file by its size, standard input by waiting for its first byte.
	if !o.allowEmpty && in != nil {
		switch {
		case fileSize == 0:
			return usagef("%s: %v; nothing was stored", o.file, errEmptyPayload)
		case fileSize < 0:
			br := bufio.NewReader(in)
			if _, err := br.Peek(1); err == io.EOF {
				return usagef("standard input: %v; nothing was stored", errEmptyPayload)
			}
			in = br
		}
	}
	e, err := g.open(ctx, openOptions{})
	if err != nil {
		return err
	}
	defer e.Close()
	st, err := e.pipe.StoreNamed(o.storeName)
	if err != nil {
		return usagef("--store-name %s: no such store: this command has %s; add it with --store %s=URL (or CLAIMCHECK_STORE)", o.storeName, e.storeLabels(), o.storeName)
	}
	if err := e.startupChecks(ctx, g, s.err, o.strict); err != nil {
		return e.refuse(err)
	}
	// The trace the job carries to its worker (docs/observability.md).
	_, tp := e.store.Telemetry()
	ctx, span := tp.Tracer(claimcheck.InstrumentationName).Start(ctx, "claimcheck.submit",
		trace.WithAttributes(attribute.String("claimcheck.kind", o.kind), attribute.String("claimcheck.tenant", o.tenant)))
	defer span.End()
	if !o.allowEmpty && in != nil {
		if in, err = refuseEmpty(in, o.file, fileSize); err != nil {
			return err
		}
	}
	var dests []string
	var tr broker.Transport
	var unreachable error
	if g.brokerURL != "" {
		dests = []string{g.destination}
		// A broker URL that is wrong is refused before anything is
		// stored; one that is only unreachable leaves the job in the
		// outbox.
		if tr, unreachable = g.openBrokerWithin(ctx, e, 10*time.Second, o.kind); unreachable != nil {
			if errors.As(unreachable, new(usageError)) {
				return e.refuse(unreachable)
			}
			if errors.Is(unreachable, claimcheck.ErrAccessDenied) {
				return e.refuse(fmt.Errorf("%w; nothing was stored", unreachable)) // credentials to fix, not an outage
			}
		} else {
			defer tr.Close()
		}
		if err := submitPriority(tr, unreachable, priority); err != nil {
			return e.refuse(err)
		}
	}
	checkIn := claimcheck.CheckInOptions{ContentType: contentType, Name: o.name, Version: o.version}
	// A bar for a main payload of progressMin or more read from a file
	// (standard input has no size to show progress against); with
	// attachments each document is counted on its own, so none is shown.
	var bar *checkInProgress
	if fileSize > 0 && len(atts) == 0 {
		bar = newCheckInProgress(s.err, fileSize, filepath.Base(o.file))
	}
	if bar != nil {
		checkIn.Progress = bar.progress
	}
	res, err := e.pipe.Enqueue(ctx, o.kind, o.tenant, in, &pipeline.EnqueueOptions{
		IdempotencyKey: o.idem,
		CheckIn:        checkIn,
		Destinations:   dests,
		Broker:         g.brokerBinding(),
		Priority:       priority,
		Attachments:    atts,
		Store:          o.storeName,
	})
	bar.done(err)
	if err != nil {
		return err
	}
	if dests != nil {
		defer relayNow(ctx, s.err, g, e, tr, unreachable)
	}
	out := submitted{ID: res.JobID, Duplicate: res.Duplicate, Kind: o.kind, Tenant: o.tenant, Inline: res.Ticket.IsInline(),
		TicketBytes: res.TicketBytes, Size: res.Ticket.Size, SHA256: res.Ticket.DigestPrefix(), Priority: cmp.Or(priority, pipeline.DefaultPriority)}
	for _, a := range o.attachments {
		out.Attachments = append(out.Attachments, a.name)
	}
	if st.Name() != claimcheck.DefaultStoreName {
		out.Store = st.Name()
	}
	if g.json {
		return printJSON(s.out, out)
	}
	verb := "enqueued"
	if out.Duplicate {
		verb = "already enqueued (idempotency key matched)"
	}
	fmt.Fprintf(s.out, "job %d %s: kind=%s tenant=%s priority=%d size=%d sha256=%s… %s ticket=%d bytes",
		out.ID, verb, o.kind, o.tenant, out.Priority, out.Size, out.SHA256, placement(out.Inline), out.TicketBytes)
	if out.Store != "" {
		fmt.Fprintf(s.out, " store=%s", out.Store)
	}
	if len(out.Attachments) > 0 {
		fmt.Fprintf(s.out, " attachments=%s (size and sha256 are the manifest's)", strings.Join(out.Attachments, ","))
	}
	fmt.Fprintln(s.out)
	return nil
}

// submitPriority refuses a priority (non-zero) on a broker that would not
// honour it, before anything is stored: tr without priorities, or no tr
// because the broker is unreachable and its queue cannot be checked.
func submitPriority(tr broker.Transport, unreachable error, priority int) error {
	if priority == 0 {
		return nil
	}
	if tr == nil {
		return fmt.Errorf("--priority: cannot check that the broker's queue has priorities while it is unreachable (%w); nothing was stored: submit again once it is reachable, or without --priority", unreachable)
	}
	if err := broker.CheckPriority(tr, priority); err != nil {
		return usagef("--priority %d with --broker: %v; nothing was stored", priority, err)
	}
	return nil
}

// relayNow is submit's best effort: relay the destination's outbox over tr
// for up to 15 s. Entries not confirmed stay in the outbox, which is
// durable. tr is nil when the broker could not be reached (unreachable).
func relayNow(ctx context.Context, stderr io.Writer, g *globals, e *env, tr broker.Transport, unreachable error) {
	if tr == nil {
		fmt.Fprintf(stderr, "kept in the outbox of destination %s (%v); claimcheck relay, work or run --broker sends it\n", g.destination, unreachable)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	opts := g.relayOptions(tr)
	opts.UntilEmpty = true
	var dead atomic.Int64
	opts.OnSent = func(id int64, err error) {
		if errors.Is(err, pipeline.ErrNotRelayable) {
			dead.Add(1)
			fmt.Fprintf(stderr, "job %d is dead, the broker refuses it for good (see claimcheck dead): %v\n", id, err)
		}
	}
	if err := e.pipe.Relay(ctx, opts); err != nil || ctx.Err() != nil {
		fmt.Fprintf(stderr, "not all of the outbox of destination %s was confirmed within 15 s; what is left stays there for claimcheck relay\n", g.destination)
		return
	}
	if dead.Load() == 0 {
		fmt.Fprintf(stderr, "relayed to the broker (destination %s)\n", g.destination)
	}
}

package cli

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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
}

func newSubmit(g *globals) *cobra.Command {
	var kind, tenant, idem, contentType, name, version string
	var allowEmpty bool
	var priority int
	c := &cobra.Command{
		Use:   "submit --kind K --tenant T [--idempotency-key X] [--priority N] FILE|-",
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
(and while the broker is unreachable) with nothing stored.`,
		Args: exactArgs(1, "FILE or -"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind == "" || tenant == "" {
				return usagef("submit needs --kind and --tenant")
			}
			if err := pipeline.ValidateKind(kind); err != nil {
				return usagef("%v", err)
			}
			if err := claimcheck.ValidateTenant(tenant); err != nil {
				return usagef("--tenant: %v", err)
			}
			if !cmd.Flags().Changed("priority") {
				priority = 0
			} else if priority == 0 {
				return usagef("--priority 0: use %d (highest) to %d (lowest)", pipeline.HighestPriority, pipeline.LowestPriority)
			} else if err := pipeline.ValidatePriority(priority); err != nil {
				return usagef("--priority: %v", err)
			}
			in, ct, closeIn, err := openInput(cmd, args[0])
			if err != nil {
				return err
			}
			defer closeIn()
			if contentType == "" {
				contentType = ct
			}
			e, err := g.open(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			if !allowEmpty {
				in = &nonEmpty{r: in, what: args[0]}
			}
			var dests []string
			var tr broker.Transport
			var unreachable error
			if g.brokerURL != "" {
				dests = []string{g.destination}
				// A broker URL that is wrong is refused before anything is
				// stored; one that is only unreachable leaves the job in the
				// outbox.
				if tr, unreachable = g.openBrokerWithin(cmd.Context(), e, 10*time.Second, kind); unreachable != nil {
					if errors.As(unreachable, new(usageError)) {
						return unreachable
					}
					if errors.Is(unreachable, claimcheck.ErrAccessDenied) {
						return fmt.Errorf("%w; nothing was stored", unreachable) // credentials to fix, not an outage
					}
				} else {
					defer tr.Close()
				}
				if err := submitPriority(tr, unreachable, priority); err != nil {
					return err
				}
			}
			res, err := e.pipe.Enqueue(cmd.Context(), kind, tenant, in, &pipeline.EnqueueOptions{
				IdempotencyKey: idem,
				CheckIn:        claimcheck.CheckInOptions{ContentType: contentType, Name: name, Version: version},
				Destinations:   dests,
				Priority:       priority,
			})
			if err != nil {
				return err
			}
			if dests != nil {
				defer relayNow(cmd, g, e, tr, unreachable)
			}
			out := submitted{ID: res.JobID, Duplicate: res.Duplicate, Kind: kind, Tenant: tenant, Inline: res.Ticket.IsInline(),
				TicketBytes: res.TicketBytes, Size: res.Ticket.Size, SHA256: res.Ticket.DigestPrefix(), Priority: cmp.Or(priority, pipeline.DefaultPriority)}
			if g.json {
				return printJSON(cmd.OutOrStdout(), out)
			}
			verb := "enqueued"
			if out.Duplicate {
				verb = "already enqueued (idempotency key matched)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %d %s: kind=%s tenant=%s priority=%d size=%d sha256=%s… %s ticket=%d bytes\n",
				out.ID, verb, kind, tenant, out.Priority, out.Size, out.SHA256, placement(out.Inline), out.TicketBytes)
			return nil
		},
	}
	c.Flags().StringVar(&kind, "kind", "", "job kind (required)")
	c.Flags().StringVar(&tenant, "tenant", "", "tenant owning the payload (required)")
	c.Flags().StringVar(&idem, "idempotency-key", "", "a second submit with the same kind, tenant and key returns the first job")
	c.Flags().StringVar(&contentType, "content-type", "", "payload media type (default: from the file extension)")
	c.Flags().StringVar(&name, "name", "", "store under this stable business key instead of the content address")
	c.Flags().StringVar(&version, "version", "", "version of a named payload that legitimately changes")
	c.Flags().BoolVar(&allowEmpty, "allow-empty", false, "accept an empty (0-byte) payload")
	c.Flags().IntVar(&priority, "priority", pipeline.DefaultPriority, "job priority, 1 (highest) to 4 (lowest); with --broker only on a queue with priorities (RabbitMQ max_priority=4)")
	return c
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

// errEmptyPayload refuses a 0-byte payload unless --allow-empty: an empty
// upload is far more often a failed download than a job.
var errEmptyPayload = errors.New("payload is empty (0 bytes); pass --allow-empty if that is intended")

// nonEmpty fails at EOF if no byte was read, so the check-in stops before
// anything is enqueued.
type nonEmpty struct {
	r    io.Reader
	what string
	n    int64
}

func (e *nonEmpty) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.n += int64(n)
	if err == io.EOF && e.n == 0 {
		return n, fmt.Errorf("%s: %w", e.what, errEmptyPayload)
	}
	return n, err
}

// openInput opens FILE or "-" (stdin). A missing or unreadable file, or a
// directory, is an error before anything is stored.
func openInput(cmd *cobra.Command, path string) (io.Reader, string, func(), error) {
	if path == "-" {
		return cmd.InOrStdin(), "", func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", nil, fmt.Errorf("cannot read %s: %v", path, unwrapPath(err))
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, "", nil, fmt.Errorf("cannot read %s: not a regular file (to read a pipe or device, give - and redirect it to standard input)", path)
	}
	ct := mime.TypeByExtension(filepath.Ext(path))
	if ct == "" {
		ct = "application/octet-stream"
	}
	return f, ct, func() { f.Close() }, nil
}

func placement(inline bool) string {
	if inline {
		return "inline"
	}
	return "offloaded"
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %s, got %d arguments", what, len(args))
		}
		return nil
	}
}

func newJobs(g *globals) *cobra.Command {
	var state, kind string
	c := &cobra.Command{
		Use:   "jobs [--state S] [--kind K]",
		Short: "List jobs",
		Long:  "List jobs, oldest first. States: available, running, retryable, scheduled, completed, cancelled, discarded, pending, or dead (cancelled and discarded).",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := g.openExisting(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			return listJobs(cmd, g, e, pipeline.ListOptions{State: state, Kind: kind})
		},
	}
	c.Flags().StringVar(&state, "state", "", "only jobs in this state")
	c.Flags().StringVar(&kind, "kind", "", "only jobs of this kind")
	c.AddCommand(newJobsRelease(g))
	return c
}

// listJobs streams jobs as a table, or as a JSON array, one page at a time.
func listJobs(cmd *cobra.Command, g *globals, e *env, opts pipeline.ListOptions) error {
	w := cmd.OutOrStdout()
	if g.json {
		sep := "[\n"
		err := e.pipe.List(cmd.Context(), opts, func(j *pipeline.JobInfo) error {
			fmt.Fprint(w, sep)
			sep = ",\n"
			return printJSONCompact(w, j)
		})
		if err != nil {
			return err
		}
		if sep == "[\n" {
			fmt.Fprint(w, sep)
		}
		fmt.Fprintln(w, "\n]")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// Dead letters show their last error too (with an --exec command's
	// stderr): whoever triages them sees why.
	dead := opts.State == pipeline.StateDead
	header := "ID\tKIND\tTENANT\tSTATE\tVIA\tPRIORITY\tATTEMPTS\tAGE\tSIZE\tPLACEMENT\tTICKET\tREASON"
	if dead {
		header += "\tERROR"
	}
	fmt.Fprintln(tw, header)
	now := time.Now()
	err := e.pipe.List(cmd.Context(), opts, func(j *pipeline.JobInfo) error {
		since := j.CreatedAt // age: since it finished or died, else since it was enqueued
		if j.FinalizedAt != nil {
			since = *j.FinalizedAt
		}
		via := "database"
		if j.Destination != "" {
			via = "broker:" + j.Destination
		}
		_, err := fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%d\t%s\t%d B\t%s", j.ID, j.Kind, j.Tenant, j.State, via, j.Priority, j.Attempts, j.MaxAttempts, age(now.Sub(since)), j.Size, placement(j.Inline), j.TicketBytes, j.Reason)
		if err == nil && dead {
			_, err = fmt.Fprintf(tw, "\t%s", strings.TrimPrefix(j.Error, j.Reason+": "))
		}
		if err == nil {
			_, err = fmt.Fprintln(tw)
		}
		return err
	})
	if err != nil {
		return err
	}
	return tw.Flush()
}

func newResult(g *globals) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "result JOB [-o FILE]",
		Short: "Write a job's verified result to standard output or a file",
		Args:  exactArgs(1, "a job id"),
		RunE: g.withJob(func(cmd *cobra.Command, e *env, id int64) error {
			r, _, err := e.pipe.OpenResult(cmd.Context(), id)
			if err != nil {
				return err
			}
			defer r.Close()
			if out == "" || out == "-" {
				_, err = io.Copy(cmd.OutOrStdout(), r)
				return err
			}
			return writeFileAtomic(out, r)
		}),
	}
	c.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	return c
}

// writeFileAtomic writes r to path through a temporary file in the same
// directory, so a failure leaves any existing file untouched.
func writeFileAtomic(path string, r io.Reader) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("cannot write %s: it is a directory; give a file name", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".claimcheck-result-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", path, unwrapPath(err))
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}

func printJSONCompact(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// age prints a duration the way an operator reads ages: 45s, 12m, 5h, 3d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

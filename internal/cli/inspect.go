package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/ops"
	"github.com/claimcheck/claimcheck/pipeline"
)

// half is one side of a claim check as inspect shows it: the ticket (what
// the queue carries, redacted) and the object (what the store holds).
type half struct {
	Tenant      string                 `json:"tenant"`
	Key         string                 `json:"key,omitempty"`
	SHA256      string                 `json:"sha256_prefix"`
	Size        int64                  `json:"size"`
	ContentType string                 `json:"content_type,omitempty"`
	Created     time.Time              `json:"created"`
	Inline      bool                   `json:"inline"`
	Object      *claimcheck.ObjectInfo `json:"object,omitempty"`
	ObjectError string                 `json:"object_error,omitempty"`
	// AgeSeconds is the stored object's age; ExpiresInSeconds the time left
	// before the bucket's lifecycle expires it (negative: past due), when
	// the store's lifecycle can be read; Expiry says what decides it.
	AgeSeconds       int64  `json:"age_seconds,omitempty"`
	ExpiresInSeconds *int64 `json:"expires_in_seconds,omitempty"`
	Expiry           string `json:"expiry,omitempty"`
}

type inspection struct {
	Job     *pipeline.JobInfo `json:"job"`
	Payload *half             `json:"payload,omitempty"`
	Result  *half             `json:"result,omitempty"`
	// For a job with attachments, Payload is its manifest's half, Main its
	// main payload's (none when it has only attachments), Attachments
	// each attachment's, in order; ManifestError the reason the manifest
	// could not be read.
	Main          *half            `json:"main,omitempty"`
	Attachments   []attachmentHalf `json:"attachments,omitempty"`
	ManifestError string           `json:"manifest_error,omitempty"`
}

// attachmentHalf is one attachment of a job as inspect shows it.
type attachmentHalf struct {
	Name string `json:"name"`
	half
}

func inspectHalf(ctx context.Context, e *env, t *claimcheck.Ticket, reveal bool) *half {
	if t == nil {
		return nil
	}
	s, storeURL, serr := e.storeFor(t)
	h := &half{Tenant: t.Tenant, Key: t.RedactedKey(), SHA256: t.DigestPrefix(), Size: t.Size, ContentType: t.ContentType, Created: t.Created, Inline: t.IsInline()}
	if reveal {
		h.Key, h.SHA256 = t.Key, t.SHA256
	}
	if serr != nil {
		h.ObjectError = claimcheck.Reason(serr)
		return h
	}
	info, err := s.Stat(ctx, t)
	if err != nil {
		h.ObjectError = claimcheck.Reason(err)
	}
	h.Object = info
	if info == nil || !info.Exists {
		return h
	}
	age := time.Since(info.ModTime)
	h.AgeSeconds = int64(age.Seconds())
	prefix := claimcheck.PrefixPayloads
	if strings.HasPrefix(t.Key, claimcheck.PrefixResults) {
		prefix = claimcheck.PrefixResults
	}
	days, rule, ok, err := ops.ExpiryDays(ctx, s, storeURL, prefix)
	switch {
	case err != nil:
		h.Expiry = "unknown: cannot read the bucket's lifecycle (" + claimcheck.Reason(err) + ")"
	case ok:
		left := int64((time.Duration(days)*24*time.Hour - age).Seconds())
		h.ExpiresInSeconds = &left
		h.Expiry = fmt.Sprintf("bucket rule %s expires %s after %d days", rule, prefix, days)
	case strings.HasPrefix(storeURL, "s3://"):
		h.Expiry = "no lifecycle rule expires " + prefix + " in this bucket"
	default:
		h.Expiry = "no lifecycle engine: sweep --expire-payloads/--expire-results decides"
	}
	return h
}

// inspectOptions are the options of inspect.
type inspectOptions struct {
	reader
	job    jobArg
	reveal bool
}

// Validate checks the job id.
func (o *inspectOptions) Validate() error { return o.job.parse() }

func newInspect(g *globals) *cobra.Command {
	o := &inspectOptions{reader: reader{g}}
	c := &cobra.Command{
		Use:   "inspect JOB [--reveal]",
		Short: "Show both halves of a job: its ticket and its stored object (redacted)",
		Long: `Show both halves of a job: the ticket the queue carries and the object the
store holds. Keys show only up to the tenant's prefix and digests only their
first 12 hex characters, unless --reveal asks for the full key and digest.
Payload bytes and wrapped data keys are never shown.`,
		Args: exactArgs(1, "a job id"),
		RunE: runE(o, o.job.bind),
	}
	c.Flags().BoolVar(&o.reveal, "reveal", false, "show full object keys and digests (they can encode tenant and content identity)")
	c.ValidArgsFunction = completeJobIDs(g, "")
	return c
}

func (o *inspectOptions) runIn(ctx context.Context, s streams, e *env) error {
	g := o.g
	j, err := e.pipe.Get(ctx, o.job.id)
	if err != nil {
		return err
	}
	in := inspection{Job: j, Payload: inspectHalf(ctx, e, j.Ticket(), o.reveal), Result: inspectHalf(ctx, e, j.ResultTicket(), o.reveal)}
	if t := j.Ticket(); t != nil && t.Manifest {
		if m, err := e.readManifest(ctx, t); err != nil {
			in.ManifestError = claimcheck.Reason(err)
		} else {
			in.Main = inspectHalf(ctx, e, m.Payload, o.reveal)
			for _, a := range m.Attachments {
				in.Attachments = append(in.Attachments, attachmentHalf{Name: a.Name, half: *inspectHalf(ctx, e, a.Ticket, o.reveal)})
			}
		}
	}
	if g.json {
		return printJSON(s.out, in)
	}
	w := s.out
	fmt.Fprintf(w, "job %d  kind=%s  tenant=%s  state=%s  attempts=%d/%d\n", j.ID, j.Kind, j.Tenant, j.State, j.Attempts, j.MaxAttempts)
	if j.Reason != "" {
		fmt.Fprintf(w, "  dead-letter reason: %s\n", j.Reason)
	}
	if j.Error != "" {
		fmt.Fprintf(w, "  last error: %s\n", j.Error)
	}
	if t := j.Ticket(); t != nil && t.Manifest {
		printHalf(w, "manifest", in.Payload, j.TicketBytes)
		if in.ManifestError != "" {
			fmt.Fprintf(w, "attachments: unknown, the manifest is unreadable (%s)\n", in.ManifestError)
		} else {
			printHalf(w, "payload", in.Main, 0)
			for _, a := range in.Attachments {
				printHalf(w, fmt.Sprintf("attachment %q", a.Name), &a.half, 0)
			}
		}
	} else {
		printHalf(w, "payload", in.Payload, j.TicketBytes)
	}
	printHalf(w, "result", in.Result, 0)
	return nil
}

func printHalf(w io.Writer, name string, h *half, ticketBytes int) {
	if h == nil {
		fmt.Fprintf(w, "%s: none\n", name)
		return
	}
	fmt.Fprintf(w, "%s ticket: tenant=%s sha256=%s size=%d type=%s created=%s", name, h.Tenant, h.SHA256, h.Size, h.ContentType, h.Created.Format(time.RFC3339))
	if ticketBytes > 0 {
		fmt.Fprintf(w, " (%d bytes)", ticketBytes)
	}
	fmt.Fprintln(w)
	switch {
	case h.Inline:
		fmt.Fprintf(w, "%s object: none (inline in the ticket)\n", name)
	case h.ObjectError != "":
		fmt.Fprintf(w, "%s object: key=%s unreadable (%s)\n", name, h.Key, h.ObjectError)
	case !h.Object.Exists:
		fmt.Fprintf(w, "%s object: key=%s MISSING\n", name, h.Key)
	default:
		o := h.Object
		fmt.Fprintf(w, "%s object: key=%s stored-size=%d encrypted=%t type=%s written=%s recorded-sha256=%s recorded-matches-ticket=%t\n",
			name, h.Key, o.Size, o.Encrypted, o.ContentType, o.ModTime.Format(time.RFC3339), o.SHA256Prefix, o.MatchesTicket)
		left := "unknown"
		if h.ExpiresInSeconds != nil {
			left = age(time.Duration(*h.ExpiresInSeconds) * time.Second)
			if *h.ExpiresInSeconds < 0 {
				left = "past due"
			}
		}
		fmt.Fprintf(w, "%s object: age=%s time-left-before-expiry=%s (%s)\n", name, age(time.Duration(h.AgeSeconds)*time.Second), left, h.Expiry)
	}
}

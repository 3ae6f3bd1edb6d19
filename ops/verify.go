package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/sweep"
)

// Verify's reserved names: its probes are checked in under VerifyTenant
// and enqueued as jobs of VerifyKind, a queue no other worker serves.
const (
	VerifyTenant = "claimcheck-verify"
	VerifyKind   = "claimcheck-verify"
)

// MaxTicketSpread is how far apart, in bytes, the job arguments of
// Verify's offloaded probes may be: "a few hundred bytes whatever the
// payload".
const MaxTicketSpread = 256

// DefaultProbeSizes are the payload sizes of Verify's uniform-ticket
// check: just above the default inline threshold, 1 MiB and 16 MiB.
var DefaultProbeSizes = []int64{70 << 10, 1 << 20, 16 << 20}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Pipeline is the live deployment's pipeline (its store, job database
	// and dead letters). Required.
	Pipeline *pipeline.Pipeline
	// ProbeSizes are the payload sizes enqueued for the uniform-ticket
	// check. Default DefaultProbeSizes.
	ProbeSizes []int64
	// Sample is how many existing offloaded tickets (of other kinds) are
	// also checked against the ticket budget. Default 100; negative: none.
	Sample int
	// SweepGrace is the sweeper's grace period. Default sweep.DefaultGrace.
	SweepGrace time.Duration
	// OrphanAge is how old the orphan probe is made to look to the sweeper
	// (the sweep runs with its clock this far ahead, so nothing waits a
	// day). Default SweepGrace plus an hour.
	OrphanAge time.Duration
	// WorkTimeout bounds the missing-payload check's work. Default 2 min.
	WorkTimeout time.Duration
	// Tenant and Kind override VerifyTenant and VerifyKind.
	Tenant, Kind string
}

// Verify runs, against a live deployment, the four checks of the seed
// article's Verification section, one Check each:
//
//   - uniform tickets: probes of each ProbeSizes size, enqueued as jobs,
//     all get offloaded tickets of at most claimcheck.MaxTicketBytes whose
//     job arguments are within MaxTicketSpread bytes of each other; up to
//     Sample existing offloaded tickets are within the budget too;
//   - missing payload dead-letters: a probe whose object is deleted behind
//     its job is cancelled on attempt 1 with reason payload-missing (the
//     job is worked here by an internal handler that does nothing);
//   - oldest dead letter readable: the oldest dead letter with an
//     offloaded payload (other than Verify's own) still has its object, and
//     its first bytes can be read and decrypted (a pass with a note when
//     there is none);
//   - orphan swept: an object checked in without a job is deleted by
//     sweep.Sweep, restricted to the reserved tenant's prefix and run as if
//     OrphanAge later.
//
// It then deletes its jobs (River's JobDelete, and their claims-registry
// rows) and objects, reporting a "cleanup" check (a warning naming what is
// left, all under the reserved tenant and kind). Errors: claimcheck.ErrConfig
// for bad options; ctx's error.
func Verify(ctx context.Context, opts VerifyOptions) (*Report, error) {
	if opts.Pipeline == nil {
		return nil, fmt.Errorf("ops: verify needs a pipeline: %w", claimcheck.ErrConfig)
	}
	if opts.Tenant == "" {
		opts.Tenant = VerifyTenant
	}
	if opts.Kind == "" {
		opts.Kind = VerifyKind
	}
	if err := claimcheck.ValidateTenant(opts.Tenant); err != nil {
		return nil, fmt.Errorf("ops: verify tenant: %v: %w", err, claimcheck.ErrConfig)
	}
	if err := pipeline.ValidateKind(opts.Kind); err != nil {
		return nil, fmt.Errorf("ops: verify kind: %v: %w", err, claimcheck.ErrConfig)
	}
	if len(opts.ProbeSizes) == 0 {
		opts.ProbeSizes = DefaultProbeSizes
	}
	for _, n := range opts.ProbeSizes {
		if n <= 0 {
			return nil, fmt.Errorf("ops: verify probe size %d: %w", n, claimcheck.ErrConfig)
		}
	}
	if opts.Sample == 0 {
		opts.Sample = 100
	}
	if opts.SweepGrace == 0 {
		opts.SweepGrace = sweep.DefaultGrace
	}
	if opts.SweepGrace < sweep.MinGrace {
		return nil, fmt.Errorf("ops: verify sweep grace %s is below the sweeper's minimum of %s: %w", opts.SweepGrace, sweep.MinGrace, claimcheck.ErrConfig)
	}
	if opts.OrphanAge == 0 {
		opts.OrphanAge = opts.SweepGrace + time.Hour
	}
	if opts.WorkTimeout <= 0 {
		opts.WorkTimeout = 2 * time.Minute
	}
	start := time.Now()
	v := &verifier{o: opts, p: opts.Pipeline, st: opts.Pipeline.Store(), rep: &Report{}}
	v.uniform(ctx)
	v.clean(ctx) // before the work below, which would otherwise download the probes
	v.missing(ctx)
	v.oldestDead(ctx)
	v.orphan(ctx)
	v.clean(ctx)
	v.reportCleanup()
	return v.rep.finish(start), ctx.Err()
}

type verifier struct {
	o       VerifyOptions
	p       *pipeline.Pipeline
	st      *claimcheck.Store
	rep     *Report
	jobs    []int64  // to delete
	objects []string // to delete
	// What clean deleted, and what it could not.
	deletedJobs, deletedObjects int
	left                        []string
}

// probeSize is the smallest probe that is offloaded.
func (v *verifier) probeSize() int64 { return max(v.st.InlineThreshold()+1, 4<<10) }

func (v *verifier) enqueue(ctx context.Context, size int64) (*pipeline.EnqueueResult, error) {
	res, err := v.p.Enqueue(ctx, v.o.Kind, v.o.Tenant, probeReader(size), &pipeline.EnqueueOptions{
		MaxAttempts: 1, CheckIn: claimcheck.CheckInOptions{ContentType: "application/octet-stream"}})
	if err != nil {
		return nil, err
	}
	v.jobs = append(v.jobs, res.JobID)
	if !res.Ticket.IsInline() {
		v.objects = append(v.objects, res.Ticket.Key)
	}
	return res, nil
}

// attachmentProbeSize is the size of each attachment of the uniform
// check's attachment probe, in bytes (attachments are objects however
// small).
const attachmentProbeSize = 1 << 10

// enqueueAttachments enqueues a probe job of claimcheck.MaxAttachments
// attachments of attachmentProbeSize bytes and a main payload of size.
func (v *verifier) enqueueAttachments(ctx context.Context, size int64) (*pipeline.EnqueueResult, error) {
	atts := make([]pipeline.Attachment, claimcheck.MaxAttachments)
	for i := range atts {
		atts[i] = pipeline.Attachment{Name: fmt.Sprintf("probe-%02d.bin", i+1), Body: probeReader(attachmentProbeSize), ContentType: "application/octet-stream"}
	}
	res, err := v.p.Enqueue(ctx, v.o.Kind, v.o.Tenant, probeReader(size), &pipeline.EnqueueOptions{
		MaxAttempts: 1, CheckIn: claimcheck.CheckInOptions{ContentType: "application/octet-stream"}, Attachments: atts})
	if err != nil {
		return nil, err
	}
	v.jobs = append(v.jobs, res.JobID)
	v.objects = append(v.objects, res.Ticket.Key)
	if m, err := v.st.ReadManifest(ctx, res.Ticket); err == nil {
		for _, t := range m.Tickets() {
			v.objects = append(v.objects, t.Key)
		}
	}
	return res, nil
}

// enqueueAged is enqueue with the ticket's creation time moved age into
// the past.
func (v *verifier) enqueueAged(ctx context.Context, size int64, age time.Duration) (*pipeline.EnqueueResult, error) {
	t, err := v.p.CheckIn(ctx, v.o.Tenant, probeReader(size), &claimcheck.CheckInOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return nil, err
	}
	if !t.IsInline() {
		v.objects = append(v.objects, t.Key)
	}
	t.Created = t.Created.Add(-age)
	tx, err := v.p.DB().BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res, err := v.p.EnqueueTx(ctx, tx, v.o.Kind, t, &pipeline.EnqueueOptions{MaxAttempts: 1})
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	v.jobs = append(v.jobs, res.JobID)
	return res, nil
}

var errStop = errors.New("stop")

// uniform is check (a).
func (v *verifier) uniform(ctx context.Context) {
	type probe struct {
		size         int64
		ticket, args int
		inline       bool
	}
	var probes []probe
	for _, size := range v.o.ProbeSizes {
		res, err := v.enqueue(ctx, size)
		if err != nil {
			v.rep.add(CheckUniform, StatusFail, "cannot enqueue a %s probe: %s", bytesText(size), classText(err))
			return
		}
		j, err := v.p.Get(ctx, res.JobID)
		if err != nil {
			v.rep.add(CheckUniform, StatusFail, "cannot read back probe job %d: %s", res.JobID, errText(err))
			return
		}
		probes = append(probes, probe{size: size, ticket: j.TicketBytes, args: j.ArgsBytes, inline: j.Inline})
	}
	// A job of the most attachments a job may carry: its ticket (its
	// manifest's) is held to the same budget.
	res, err := v.enqueueAttachments(ctx, v.o.ProbeSizes[0])
	if err != nil {
		v.rep.add(CheckUniform, StatusFail, "cannot enqueue a probe with %d attachments: %s", claimcheck.MaxAttachments, classText(err))
		return
	}
	aj, err := v.p.Get(ctx, res.JobID)
	if err != nil {
		v.rep.add(CheckUniform, StatusFail, "cannot read back probe job %d: %s", res.JobID, errText(err))
		return
	}
	var problems, sizes []string
	if aj.TicketBytes > claimcheck.MaxTicketBytes {
		problems = append(problems, fmt.Sprintf("the probe with %d attachments has a ticket of %d bytes, above the %d-byte budget", claimcheck.MaxAttachments, aj.TicketBytes, claimcheck.MaxTicketBytes))
	}
	minArgsAll, maxArgsAll := aj.ArgsBytes, aj.ArgsBytes
	minArgs, maxArgs := probes[0].args, probes[0].args
	for _, pr := range probes {
		minArgs, maxArgs = min(minArgs, pr.args), max(maxArgs, pr.args)
		sizes = append(sizes, fmt.Sprintf("%s → %d", bytesText(pr.size), pr.ticket))
		switch {
		case pr.inline:
			problems = append(problems, fmt.Sprintf("the %s probe travelled inline, a ticket of %d bytes: the inline threshold (%s) lets messages grow with their payload",
				bytesText(pr.size), pr.ticket, bytesText(v.st.InlineThreshold())))
		case pr.ticket > claimcheck.MaxTicketBytes:
			problems = append(problems, fmt.Sprintf("the %s probe's ticket is %d bytes, above the %d-byte budget", bytesText(pr.size), pr.ticket, claimcheck.MaxTicketBytes))
		}
	}
	minArgs, maxArgs = min(minArgs, minArgsAll), max(maxArgs, maxArgsAll)
	sizes = append(sizes, fmt.Sprintf("%s + %d attachments → %d", bytesText(v.o.ProbeSizes[0]), claimcheck.MaxAttachments, aj.TicketBytes))
	if maxArgs-minArgs > MaxTicketSpread {
		problems = append(problems, fmt.Sprintf("job arguments range from %d to %d bytes, more than %d apart", minArgs, maxArgs, MaxTicketSpread))
	}

	// Sample the tickets already in the job table.
	var sampled, over, minT, maxT int
	var minSize, maxSize int64
	if v.o.Sample > 0 {
		err := v.p.List(ctx, pipeline.ListOptions{PageSize: 100}, func(j *pipeline.JobInfo) error {
			if j.Kind == v.o.Kind || j.Tenant == v.o.Tenant || j.Ticket() == nil || j.Inline {
				return nil
			}
			if sampled == 0 || j.TicketBytes < minT {
				minT = j.TicketBytes
			}
			maxT = max(maxT, j.TicketBytes)
			if sampled == 0 || j.Size < minSize {
				minSize = j.Size
			}
			maxSize = max(maxSize, j.Size)
			if j.TicketBytes > claimcheck.MaxTicketBytes {
				over++
			}
			sampled++
			if sampled >= v.o.Sample {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			problems = append(problems, "cannot list jobs to sample: "+errText(err))
		}
	}
	if over > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d sampled tickets exceed the %d-byte budget", over, sampled, claimcheck.MaxTicketBytes))
	}
	detail := fmt.Sprintf("probe payload → ticket bytes: %s; job arguments %s bytes", strings.Join(sizes, ", "), span(fmt.Sprint(minArgs), fmt.Sprint(maxArgs)))
	if sampled > 0 {
		detail += fmt.Sprintf("; %s (payloads of %s): %s bytes", plural(sampled, "sampled offloaded ticket"),
			span(bytesText(minSize), bytesText(maxSize)), span(fmt.Sprint(minT), fmt.Sprint(maxT)))
	} else if v.o.Sample > 0 {
		detail += "; no other offloaded tickets to sample"
	}
	if len(problems) > 0 {
		v.rep.add(CheckUniform, StatusFail, "%s (%s)", strings.Join(problems, "; "), detail)
		return
	}
	v.rep.add(CheckUniform, StatusPass, "%s: all ≤ %d bytes; the probes' job arguments within %d bytes of each other", detail, claimcheck.MaxTicketBytes, maxArgs-minArgs)
}

// missing is check (b). The probe's ticket is dated past the store's
// NotFound grace (claimcheck.Options.NotFoundGrace): within it a missing
// object is taken for an eventually consistent store catching up, and
// retried.
func (v *verifier) missing(ctx context.Context) {
	size := v.probeSize()
	res, err := v.enqueueAged(ctx, size, v.st.NotFoundGrace()+time.Minute)
	if err != nil {
		v.rep.add(CheckMissingDead, StatusFail, "cannot enqueue a %s probe: %s", bytesText(size), classText(err))
		return
	}
	if res.Ticket.IsInline() {
		v.rep.add(CheckMissingDead, StatusFail, "the %s probe travelled inline: no object to delete", bytesText(size))
		return
	}
	if err := v.st.Bucket().Delete(ctx, res.Ticket.Key); err != nil {
		v.rep.add(CheckMissingDead, StatusFail, "cannot delete the probe's object (%v)", gcerrors.Code(err))
		return
	}
	var handled atomic.Bool
	h := claimcheck.HandlerFunc(func(_ context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		if job.ID == fmt.Sprint(res.JobID) {
			handled.Store(true)
		}
		return nil, nil
	})
	wctx, cancel := context.WithTimeout(ctx, v.o.WorkTimeout)
	werr := v.p.Work(wctx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{v.o.Kind: h}, UntilEmpty: true})
	timedOut := wctx.Err() != nil && ctx.Err() == nil
	cancel()
	j, err := v.p.Get(ctx, res.JobID)
	switch {
	case werr != nil:
		v.rep.add(CheckMissingDead, StatusFail, "working the probe failed: %s", errText(werr))
	case err != nil:
		v.rep.add(CheckMissingDead, StatusFail, "cannot read back probe job %d: %s", res.JobID, errText(err))
	case handled.Load():
		v.rep.add(CheckMissingDead, StatusFail, "the handler ran for job %d although its payload had been deleted: a deleted object was still readable", j.ID)
	case timedOut && !j.Dead:
		v.rep.add(CheckMissingDead, StatusFail, "job %d was not worked within %s (state %s)", j.ID, v.o.WorkTimeout, j.State)
	case j.State != "cancelled" || j.Attempts != 1 || j.Reason != claimcheck.ReasonPayloadMissing:
		v.rep.add(CheckMissingDead, StatusFail, "job %d whose payload was deleted ended %s after %s with reason %q (want cancelled on attempt 1 with %s): %s",
			j.ID, j.State, plural(j.Attempts, "attempt"), j.Reason, claimcheck.ReasonPayloadMissing, j.Error)
	default:
		v.rep.add(CheckMissingDead, StatusPass, "job %d, whose %s payload was deleted behind it, went to the dead letters on attempt 1 (cancelled, %s) and its handler never ran",
			j.ID, bytesText(size), j.Reason)
	}
}

// oldestDead is check (c).
func (v *verifier) oldestDead(ctx context.Context) {
	var oldest *pipeline.JobInfo
	inline, unparsed := 0, 0
	err := v.p.List(ctx, pipeline.ListOptions{State: pipeline.StateDead, PageSize: 100}, func(j *pipeline.JobInfo) error {
		switch {
		case j.Kind == v.o.Kind || j.Tenant == v.o.Tenant:
			return nil
		case j.Ticket() == nil:
			unparsed++
			return nil
		case j.Inline:
			inline++
			return nil
		}
		oldest = j
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		v.rep.add(CheckOldestDead, StatusFail, "cannot list dead letters: %s", errText(err))
		return
	}
	keep := claimcheck.FormatDuration(v.p.DeadLetterRetention())
	if oldest == nil {
		note := "no dead letters"
		if inline+unparsed > 0 {
			note = fmt.Sprintf("no dead letter with an offloaded payload (%d inline, whose payload travels in the ticket; %d with an unreadable ticket)", inline, unparsed)
		}
		v.rep.add(CheckOldestDead, StatusPass, "%s: nothing to check (dead letters are kept %s)", note, keep)
		return
	}
	t := oldest.Ticket()
	age := claimcheck.FormatDuration(time.Since(oldest.CreatedAt).Truncate(time.Minute))
	who := fmt.Sprintf("the oldest dead letter, job %d (kind %s, tenant %s, %s, created %s ago)", oldest.ID, oldest.Kind, oldest.Tenant, oldest.Reason, age)
	info, err := v.st.Stat(ctx, t)
	if err != nil {
		v.rep.add(CheckOldestDead, StatusFail, "%s: cannot look its payload up: %s", who, classText(err))
		return
	}
	if !info.Exists {
		v.rep.add(CheckOldestDead, StatusFail, "%s: its payload is gone (expired or deleted), so it cannot be replayed: the store's expiry must outlive the dead-letter retention (%s); see claimcheck doctor", who, keep)
		return
	}
	docs := ""
	if t.Manifest {
		// Replayable only if every document its manifest lists is there.
		m, err := v.st.ReadManifest(ctx, t)
		if err != nil {
			v.rep.add(CheckOldestDead, StatusFail, "%s: its manifest cannot be read: %s", who, classText(err))
			return
		}
		for _, a := range m.Attachments {
			ai, err := v.st.Stat(ctx, a.Ticket)
			switch {
			case err != nil:
				v.rep.add(CheckOldestDead, StatusFail, "%s: cannot look its attachment %q up: %s", who, a.Name, classText(err))
				return
			case !ai.Exists:
				v.rep.add(CheckOldestDead, StatusFail, "%s: its attachment %q is gone (expired or deleted), so it cannot be replayed: the store's expiry must outlive the dead-letter retention (%s); see claimcheck doctor", who, a.Name, keep)
				return
			}
		}
		docs = fmt.Sprintf(" with its %s", plural(len(m.Attachments), "attachment"))
	}
	pl, err := v.st.Claim(t)
	if err == nil {
		var r io.ReadCloser
		if r, err = pl.OpenStream(ctx); err == nil {
			_, err = io.CopyN(io.Discard, r, 1<<20)
			if errors.Is(err, io.EOF) {
				err = nil
			}
			r.Close()
		}
		pl.Close()
	}
	if err != nil {
		v.rep.add(CheckOldestDead, StatusFail, "%s: its payload exists but cannot be read: %s", who, classText(err))
		return
	}
	v.rep.add(CheckOldestDead, StatusPass, "%s: its %s payload%s is present (written %s ago) and readable; dead letters are kept %s",
		who, bytesText(t.Size), docs, claimcheck.FormatDuration(time.Since(info.ModTime).Truncate(time.Minute)), keep)
}

// orphan is check (d).
func (v *verifier) orphan(ctx context.Context) {
	size := v.probeSize()
	t, err := v.st.CheckIn(ctx, v.o.Tenant, probeReader(size), &claimcheck.CheckInOptions{ContentType: "application/octet-stream"})
	if err != nil {
		v.rep.add(CheckOrphan, StatusFail, "cannot check in a %s probe: %s", bytesText(size), classText(err))
		return
	}
	if t.IsInline() {
		v.rep.add(CheckOrphan, StatusFail, "the %s probe travelled inline: no object to sweep", bytesText(size))
		return
	}
	v.objects = append(v.objects, t.Key)
	prefix := claimcheck.PrefixPayloads + v.o.Tenant + "/"
	now := time.Now().Add(v.o.OrphanAge)
	var entry *sweep.Entry
	_, err = sweep.Sweep(ctx, sweep.Options{
		Store: v.st, DB: v.p.DB(), Grace: v.o.SweepGrace, Prefixes: []string{prefix},
		Now:                func() time.Time { return now },
		AllowEmptyRegistry: true, // only the reserved tenant's prefix is swept
		OnEntry: func(e sweep.Entry) error {
			if e.Key == t.Key {
				entry = &e
			}
			return nil
		},
	})
	if err != nil {
		v.rep.add(CheckOrphan, StatusFail, "the sweep of %s failed: %s", prefix, classText(err))
		return
	}
	_, aerr := v.st.Bucket().Attributes(ctx, t.Key)
	gone := gcerrors.Code(aerr) == gcerrors.NotFound
	how := fmt.Sprintf("swept %s with grace %s as if %s later", prefix, claimcheck.FormatDuration(v.o.SweepGrace), claimcheck.FormatDuration(v.o.OrphanAge))
	switch {
	case aerr != nil && !gone:
		v.rep.add(CheckOrphan, StatusFail, "%s, then cannot tell whether the probe is gone: %v", how, gcerrors.Code(aerr))
	case entry == nil:
		v.rep.add(CheckOrphan, StatusFail, "%s: the sweeper never listed the probe checked in without a job", how)
	case !gone || !entry.Removed:
		v.rep.add(CheckOrphan, StatusFail, "%s: the probe checked in without a job is still there, kept as %s: %s", how, entry.Reason, entry.Detail)
	default:
		v.rep.add(CheckOrphan, StatusPass, "a %s probe checked in without a job was removed as %s (%s): %s", bytesText(size), entry.Reason, entry.Detail, how)
	}
}

// clean deletes the jobs (and their registry rows) and objects made since
// the last clean, and records what it could not.
func (v *verifier) clean(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if len(v.jobs) > 0 {
		if err := v.deleteJobs(ctx); err != nil {
			v.left = append(v.left, err.Error())
		} else {
			v.deletedJobs += len(v.jobs)
		}
	}
	for _, key := range v.objects {
		if err := v.st.Bucket().Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			v.left = append(v.left, fmt.Sprintf("object %s left (%v)", sweep.RedactKey(key), gcerrors.Code(err)))
			continue
		}
		v.deletedObjects++
	}
	v.jobs, v.objects = nil, nil
}

func (v *verifier) reportCleanup() {
	if len(v.left) > 0 {
		v.rep.add(CheckCleanup, StatusWarn, "%s (all under tenant %s, kind %s)", strings.Join(v.left, "; "), v.o.Tenant, v.o.Kind)
		return
	}
	v.rep.add(CheckCleanup, StatusPass, "removed %s (and their claims-registry rows) and %s", plural(v.deletedJobs, "probe job"), plural(v.deletedObjects, "probe object"))
}

// deleteJobs deletes v.jobs and their claims-registry rows.
func (v *verifier) deleteJobs(ctx context.Context) error {
	if _, err := v.p.Delete(ctx, v.jobs...); err != nil {
		return fmt.Errorf("jobs left (%v): %v", v.jobs, err)
	}
	return nil
}

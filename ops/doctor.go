package ops

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/lifecycle"
	"github.com/claimcheck/claimcheck/pipeline"
)

// DoctorTenant is the reserved tenant Doctor checks its probes in under:
// every probe object lives under payloads/claimcheck-doctor/ or
// results/claimcheck-doctor/ and is deleted before Doctor returns.
const DoctorTenant = "claimcheck-doctor"

// doctorProbeSize is the size of the store probe: small, and offloaded
// whatever the inline threshold (the probe store never inlines).
const doctorProbeSize = 4 << 10

// DoctorOptions configure Doctor.
type DoctorOptions struct {
	// Pipeline is the deployment's job pipeline, opened with its live
	// configuration; its Store is the store probed unless Store is set.
	// Required.
	Pipeline *pipeline.Pipeline
	// Store is the store probed, one of Pipeline.Stores (a named store
	// of a deployment that has several); default Pipeline.Store().
	Store *claimcheck.Store
	// Retention is the minimum lifetime each prefix needs
	// (claimcheck.ComputeRetention). Required.
	Retention *claimcheck.Retention
	// StoreURL is the URL the store was opened with. Its scheme says where
	// expiry is enforced: s3 by the bucket's lifecycle configuration, which
	// Doctor reads (the URL's host names the bucket); file by the sweeper,
	// which Doctor cannot see. Empty means the default file store.
	StoreURL string
	// Lifecycle reads the bucket's lifecycle configuration. Default: the
	// store's (lifecycle.ManagerOf, the one `claimcheck lifecycle apply`
	// uses).
	Lifecycle lifecycle.Manager
	// MaxMessageSize is the transport's maximum message size in bytes.
	// Default pipeline.DefaultMaxMessageSize.
	MaxMessageSize int64
	// Tenant is the reserved tenant of the probes. Default DoctorTenant.
	Tenant string
	// NoProbes skips the checks that write probe objects (store,
	// credentials, keeper: reported as skipped), for a page that must not
	// write on every view; the others only read (the deployment key check
	// reads existing objects' attributes and unwraps their data keys).
	NoProbes bool
}

// Doctor checks a live configuration and reports, one Check each:
//
//   - store: a probe object can be written under payloads/ and results/,
//     read back verified, and deleted (through a plain store over the same
//     bucket, so a keeper failure is not mistaken for a store failure);
//   - credentials: the credentials in use can read what workers read; an
//     access-denied answer is a configuration failure named as such, never
//     reported as a missing object;
//   - keeper: the configured store (keeper, secret) checks in and claims an
//     encrypted probe, inline and offloaded: a data key is wrapped and
//     unwrapped (a warning when no keeper is configured);
//   - deployment key: the configured keeper unwraps the data key of an
//     existing sealed object of the store (the first found of each key id
//     recorded, Store.FindSealed; attributes only, no payload bytes), so a
//     host given another key, or none, fails naming the key id it needs
//     rather than passing on its own probe;
//   - retention: the minimum lifetimes the Retention requires;
//   - expiry payloads/ and expiry results/: on S3, the bucket's actual
//     lifecycle rules expire nothing under the prefix sooner than required
//     (a warning when nothing expires at all); on a file store, a note that
//     the sweeper enforces expiry;
//   - dead-letter retention: the pipeline's dead-letter retention is the
//     one the Retention counts, and a dead letter's payload outlives it;
//   - inline threshold: see CheckInlineThreshold.
//
// Every probe is deleted before Doctor returns; with NoProbes none is
// written. Doctor returns an error only for bad options
// (claimcheck.ErrConfig) or a cancelled ctx; a failed check is a Report
// that is not OK.
func Doctor(ctx context.Context, opts DoctorOptions) (*Report, error) {
	if opts.Pipeline == nil || opts.Retention == nil {
		return nil, fmt.Errorf("ops: doctor needs a pipeline and a retention: %w", claimcheck.ErrConfig)
	}
	if opts.Tenant == "" {
		opts.Tenant = DoctorTenant
	}
	if err := claimcheck.ValidateTenant(opts.Tenant); err != nil {
		return nil, fmt.Errorf("ops: doctor tenant: %v: %w", err, claimcheck.ErrConfig)
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = pipeline.DefaultMaxMessageSize
	}
	start := time.Now()
	st := opts.Store
	if st == nil {
		st = opts.Pipeline.Store()
	}
	d := &doctor{o: opts, st: st, rep: &Report{}}
	d.scheme, d.bucket = storeScheme(opts.StoreURL)
	storeOK := true
	if opts.NoProbes {
		for _, name := range []string{CheckStore, CheckCredentials, CheckKeeper} {
			d.rep.add(name, StatusSkip, "not probed: this view only reads (run the probes to write, read back and delete probe objects)")
		}
	} else {
		storeOK = d.checkStore(ctx)
		d.checkKeeper(ctx, storeOK)
	}
	d.checkDeploymentKey(ctx, storeOK)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.checkRetention()
	shortest := d.checkExpiry(ctx)
	d.checkDeadLetter(shortest)
	d.rep.Checks = append(d.rep.Checks, CheckInlineThreshold(d.st.InlineThreshold(), opts.MaxMessageSize))
	return d.rep.finish(start), ctx.Err()
}

type doctor struct {
	o              DoctorOptions
	st             *claimcheck.Store
	rep            *Report
	scheme, bucket string
}

// storeScheme is the store URL's scheme ("file" when empty) and, for s3,
// the bucket.
func storeScheme(raw string) (scheme, bucket string) {
	if raw == "" {
		return "file", ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", ""
	}
	return u.Scheme, u.Host
}

func (d *doctor) where() string {
	switch d.scheme {
	case "s3":
		return "S3 bucket " + d.bucket
	case "file":
		return "the file store"
	default:
		return d.scheme + ":// store"
	}
}

// classText names an error's class for the table: "access denied (a
// configuration failure: ...)" or the class and message.
func classText(err error) string {
	switch {
	case errors.Is(err, claimcheck.ErrAccessDenied):
		return "ACCESS DENIED — a configuration failure (credentials or permissions), not a missing object: " + errText(err)
	case errors.Is(err, claimcheck.ErrKeeper):
		return "KEEPER FAILED — a configuration failure (the key-encryption key is disabled, not usable by this caller, missing, or its keeper unreachable), not a corrupt or missing payload: " + errText(err)
	case errors.Is(err, claimcheck.ErrUnavailable):
		return "store unavailable: " + errText(err)
	default:
		return errText(err)
	}
}

// checkStore writes, reads back and deletes a probe under each prefix with
// a plain store (no keeper, no secret) over the same bucket, then reports
// the store row and the credentials row. It reports whether the store row
// passed.
func (d *doctor) checkStore(ctx context.Context) bool {
	plain, err := claimcheck.NewStore(d.st.Bucket(), &claimcheck.Options{Name: d.st.Name(), InlineThreshold: -1})
	if err != nil {
		d.rep.add(CheckStore, StatusFail, "cannot make a probe store over the bucket: %s", errText(err))
		d.rep.add(CheckCredentials, StatusSkip, "not checked: the store probe could not run")
		return false
	}
	defer plain.Close()
	pt, perr := plain.CheckIn(ctx, d.o.Tenant, probeReader(doctorProbeSize), &claimcheck.CheckInOptions{ContentType: "application/octet-stream"})
	var rt *claimcheck.Ticket
	rerr := perr
	if perr == nil {
		rt, rerr = plain.CheckIn(ctx, d.o.Tenant, probeReader(doctorProbeSize), &claimcheck.CheckInOptions{ContentType: "application/octet-stream", Result: true})
	}
	var readErr error
	if perr == nil {
		readErr = claimAndVerify(ctx, plain, pt)
	}
	var delErrs []string
	for _, t := range []*claimcheck.Ticket{pt, rt} {
		if t == nil {
			continue
		}
		if err := d.st.Bucket().Delete(context.WithoutCancel(ctx), t.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			delErrs = append(delErrs, fmt.Sprintf("%s (%v)", t.RedactedKey(), gcerrors.Code(err)))
		}
	}

	// The store row: writable, and the probes removed.
	ok := false
	prefixes := fmt.Sprintf("%s%s/ and %s%s/", claimcheck.PrefixPayloads, d.o.Tenant, claimcheck.PrefixResults, d.o.Tenant)
	switch {
	case perr != nil:
		d.rep.add(CheckStore, StatusFail, "%s: cannot write a probe under %s%s/: %s", d.where(), claimcheck.PrefixPayloads, d.o.Tenant, classText(perr))
	case rerr != nil:
		d.rep.add(CheckStore, StatusFail, "%s: wrote a probe under %s but cannot write one under %s%s/ (where results go): %s",
			d.where(), claimcheck.PrefixPayloads, claimcheck.PrefixResults, d.o.Tenant, classText(rerr))
	case len(delErrs) > 0:
		ok = true
		d.rep.add(CheckStore, StatusWarn, "%s: wrote %s probes under %s, but could not delete %s: the sweeper needs delete permission (the probes are orphans it will collect)",
			d.where(), bytesText(doctorProbeSize), prefixes, strings.Join(delErrs, ", "))
	default:
		ok = true
		d.rep.add(CheckStore, StatusPass, "%s: wrote %s probes under %s, read back, deleted", d.where(), bytesText(doctorProbeSize), prefixes)
	}

	// The credentials row: can these credentials read what workers read?
	switch {
	case perr == nil && readErr == nil:
		st, detail := StatusPass, "read the probe back and verified its size and SHA-256 (what a worker's claim does)"
		if _, _, err := d.st.Bucket().ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: claimcheck.PrefixPayloads}); err != nil {
			st = StatusWarn
			detail += fmt.Sprintf("; but listing %s fails (%v): the sweeper and verify need to list", claimcheck.PrefixPayloads, gcerrors.Code(err))
		} else {
			detail += "; listed " + claimcheck.PrefixPayloads
		}
		d.rep.add(CheckCredentials, st, "%s", detail)
	case perr == nil:
		d.rep.add(CheckCredentials, StatusFail, "the probe just written cannot be read back: %s", classText(readErr))
	default:
		// Nothing was written: ask for a key that does not exist. Allowed
		// reads answer not-found; refused credentials answer access denied.
		_, err := d.st.Bucket().Attributes(ctx, claimcheck.PrefixPayloads+d.o.Tenant+"/_absent")
		switch code := gcerrors.Code(err); {
		case err == nil || code == gcerrors.NotFound:
			d.rep.add(CheckCredentials, StatusPass, "reads are allowed (a read of a missing key answered not-found, not access denied); no probe to read back since none could be written")
		case code == gcerrors.PermissionDenied:
			d.rep.add(CheckCredentials, StatusFail, "ACCESS DENIED reading %s: the store refuses these credentials — a configuration failure, not a missing payload (workers would retry every job as access-denied): check the access key, secret and the role's read permission on %s",
				claimcheck.PrefixPayloads, claimcheck.PrefixPayloads)
		default:
			d.rep.add(CheckCredentials, StatusFail, "cannot read from %s: the store is unreachable (%v)", d.where(), code)
		}
	}
	return ok
}

// claimAndVerify claims t from s and reads and verifies all of it.
func claimAndVerify(ctx context.Context, s *claimcheck.Store, t *claimcheck.Ticket) error {
	p, err := s.Claim(t)
	if err != nil {
		return err
	}
	defer p.Close()
	return p.Verify(ctx)
}

// checkKeeper checks a probe in and claims it back through the configured
// store: inline (the keeper alone) and, if the store works, offloaded.
func (d *doctor) checkKeeper(ctx context.Context, storeOK bool) {
	var done []string
	encrypted, plain := 0, 0
	if th := d.st.InlineThreshold(); th > 0 {
		t, err := d.st.CheckIn(ctx, d.o.Tenant, probeReader(min(th, 64)), nil)
		if err != nil {
			d.rep.add(CheckKeeper, StatusFail, "cannot check in an inline probe (the keeper wraps its data key): %s", classText(err))
			return
		}
		if err := claimAndVerify(ctx, d.st, t); err != nil {
			d.rep.add(CheckKeeper, StatusFail, "checked an inline probe in but cannot claim it back (the keeper unwraps its data key): %s", classText(err))
			return
		}
		if t.DEK != "" {
			encrypted++
			done = append(done, "an encrypted inline probe")
		} else {
			plain++
		}
	}
	note := ""
	if !storeOK {
		if len(done) == 0 {
			d.rep.add(CheckKeeper, StatusSkip, "not checked: the store probe failed")
			return
		}
		note = "; no offloaded probe (the store probe failed)"
	} else {
		size := max(d.st.InlineThreshold()+1, doctorProbeSize)
		t, err := d.st.CheckIn(ctx, d.o.Tenant, probeReader(size), nil)
		if err != nil {
			d.rep.add(CheckKeeper, StatusFail, "the store takes a plain probe, but the configured store (keeper, secret) cannot check one in: %s", classText(err))
			return
		}
		info, serr := d.st.Stat(ctx, t)
		verr := claimAndVerify(ctx, d.st, t)
		_ = d.st.Bucket().Delete(context.WithoutCancel(ctx), t.Key)
		switch {
		case serr != nil:
			d.rep.add(CheckKeeper, StatusFail, "cannot read the probe's attributes: %s", classText(serr))
			return
		case verr != nil:
			d.rep.add(CheckKeeper, StatusFail, "checked a %s probe in but cannot claim it back (the keeper unwraps its data key): %s", bytesText(size), classText(verr))
			return
		case info.Encrypted:
			encrypted++
			done = append(done, "an encrypted "+bytesText(size)+" probe object")
		default:
			plain++
		}
	}
	switch {
	case encrypted > 0 && plain == 0:
		d.rep.add(CheckKeeper, StatusPass, "wrapped and unwrapped data keys: %s checked in and claimed back verified%s", strings.Join(done, " and "), note)
	case plain > 0 && encrypted == 0:
		d.rep.add(CheckKeeper, StatusWarn, "no keeper: payloads are stored (and inline ones carried) unencrypted; set --keeper to encrypt them at rest")
	default:
		d.rep.add(CheckKeeper, StatusFail, "some probes were stored encrypted and some not")
	}
}

// checkDeploymentKey unwraps, with the configured keeper, the data key of
// one existing sealed object per key id recorded in the store (the
// doctor's own probes left out): a key that is not the deployment's fails,
// naming both key ids and how to share the key.
func (d *doctor) checkDeploymentKey(ctx context.Context, storeOK bool) {
	if !storeOK {
		d.rep.add(CheckDeploymentKey, StatusSkip, "not checked: the store probe failed")
		return
	}
	found, err := d.st.FindSealed(ctx, 100)
	if err != nil {
		d.rep.add(CheckDeploymentKey, StatusFail, "cannot look for the deployment's sealed objects in %s: %s", d.where(), classText(err))
		return
	}
	const share = "every host of a deployment needs the same key: `claimcheck keys` on a host that has it prints base64key://…; give it here as --keeper (or CLAIMCHECK_KEEPER), or copy that host's <data>/keys/kek.key to this one"
	var ok, failed []string
	for _, o := range found {
		if o.Tenant == d.o.Tenant {
			continue
		}
		id := claimcheck.KeyIDText(o.KeyID)
		if _, _, err := d.st.SealedKey(ctx, o.Key); err != nil {
			failed = append(failed, fmt.Sprintf("this host's keeper cannot unwrap the data key of a payload of tenant %s: %s", o.Tenant, classText(err)))
			continue
		}
		ok = append(ok, id)
	}
	switch {
	case len(failed) > 0:
		d.rep.add(CheckDeploymentKey, StatusFail, "%s; %s", strings.Join(failed, "; "), share)
	case len(ok) > 0:
		d.rep.add(CheckDeploymentKey, StatusPass, "unwrapped the data key of an existing sealed object under key id %s with this host's keeper (key id %s)", strings.Join(ok, ", "), claimcheck.KeyIDText(d.st.KeyID()))
	default:
		d.rep.add(CheckDeploymentKey, StatusPass, "no sealed object in %s yet: nothing to check this host's key against (run doctor again once payloads are stored)", d.where())
	}
}

func (d *doctor) checkRetention() {
	r := d.o.Retention
	var terms []string
	for _, s := range r.PayloadSteps {
		terms = append(terms, s.Name+" "+claimcheck.FormatDuration(s.Add))
	}
	d.rep.add(CheckRetention, StatusPass, "%s need %s, %s %s: %s = %s, rounded up",
		claimcheck.PrefixPayloads, plural(r.PayloadDays, "day"), claimcheck.PrefixResults, plural(r.ResultDays, "day"),
		strings.Join(terms, " + "), claimcheck.FormatDuration(r.PayloadTotal))
}

// checkExpiry reports the expiry rows and returns the shortest expiry, in
// days, of any rule reaching payloads/ (0: none known).
func (d *doctor) checkExpiry(ctx context.Context) int {
	r := d.o.Retention
	prefixes := []struct {
		prefix string
		need   int
	}{{claimcheck.PrefixPayloads, r.PayloadDays}, {claimcheck.PrefixResults, r.ResultDays}}
	switch d.scheme {
	case "file":
		for _, p := range prefixes {
			d.rep.add(CheckExpiry+p.prefix, StatusPass, "file store: no lifecycle engine, so the sweeper enforces expiry; run \"claimcheck sweep --expire-payloads %dd --expire-results %dd\" on a schedule (the doctor cannot see that schedule); %s need %s",
				r.PayloadDays, r.ResultDays, p.prefix, plural(p.need, "day"))
		}
		return 0
	case "mem":
		for _, p := range prefixes {
			d.rep.add(CheckExpiry+p.prefix, StatusPass, "mem:// store: objects live only as long as this process")
		}
		return 0
	}
	m := d.o.Lifecycle
	if m == nil {
		m, _ = lifecycle.ManagerOf(d.st)
	}
	if m == nil {
		for _, p := range prefixes {
			if d.scheme == "s3" {
				d.rep.add(CheckExpiry+p.prefix, StatusFail, "the s3:// store exposes no S3 client to read its lifecycle configuration with")
				continue
			}
			d.rep.add(CheckExpiry+p.prefix, StatusWarn, "cannot read the lifecycle configuration of a %s:// store here: check by hand that nothing expires %s sooner than %s (\"claimcheck lifecycle --format gcs\" prints the policy)",
				d.scheme, p.prefix, plural(p.need, "day"))
		}
		return 0
	}
	cfg, err := m.ReadLifecycle(ctx, "")
	if err != nil {
		for _, p := range prefixes {
			d.rep.add(CheckExpiry+p.prefix, StatusFail, "cannot read the lifecycle configuration of bucket %s: %s, so the expiry of %s is unknown", d.bucket, lifecycleErrText(err), p.prefix)
		}
		return 0
	}
	rows, shortest := expiryRows(cfg.Rules, cfg.Found, d.bucket, d.st.Namespace(), r)
	d.rep.Checks = append(d.rep.Checks, rows...)
	return shortest
}

// expiryRows are the expiry and abort-incomplete-uploads rows of a bucket
// whose lifecycle rules are rules (found: the bucket has a lifecycle
// configuration), for the objects under ns (the store's namespace) +
// payloads/ and results/, against the lifetimes r requires; and the
// shortest expiry, in days, of any rule reaching payloads/ (0: none). Doctor
// and StartupExpiry both judge by it.
func expiryRows(rules []lifecycle.Rule, found bool, bucket, ns string, r *claimcheck.Retention) ([]Check, int) {
	rep := &Report{}
	d := struct {
		bucket string
		rep    *Report
	}{bucket, rep}
	prefixes := []struct {
		prefix string
		need   int
	}{{claimcheck.PrefixPayloads, r.PayloadDays}, {claimcheck.PrefixResults, r.ResultDays}}
	shortest := 0
	for i, p := range prefixes {
		e := evaluateExpiry(rules, ns+p.prefix, p.need)
		if i == 0 {
			shortest = e.shortest
		}
		name := CheckExpiry + p.prefix
		switch {
		case len(e.problems) > 0:
			fix := "run \"claimcheck lifecycle apply\", which replaces claimcheck's rules"
			if e.foreign {
				fix = "narrow or lengthen the other team's rule (\"claimcheck lifecycle apply\" refuses to install beside it)"
			}
			d.rep.add(name, StatusFail, "bucket %s: %s, but objects under %s must live %s: %s",
				d.bucket, strings.Join(e.problems, "; "), p.prefix, plural(p.need, "day"), fix)
		case e.cover == 0 && !found:
			d.rep.add(name, StatusWarn, "bucket %s has no lifecycle configuration: nothing under %s ever expires (storage grows); \"claimcheck lifecycle apply\" installs %s",
				d.bucket, p.prefix, plural(p.need, "day"))
		case e.cover == 0:
			d.rep.add(name, StatusWarn, "no rule of bucket %s expires %s: nothing there ever expires (storage grows); \"claimcheck lifecycle apply\" installs %s",
				d.bucket, p.prefix, plural(p.need, "day"))
		default:
			d.rep.add(name, StatusPass, "bucket %s expires %s after %s (rule %s), at least the %s needed",
				d.bucket, p.prefix, plural(e.cover, "day"), e.coverRule, plural(p.need, "day"))
		}
		if days, rule := abortRule(rules, ns+p.prefix); days > 0 {
			d.rep.add(CheckAbortIncomplete+p.prefix, StatusPass, "bucket %s aborts incomplete multipart uploads under %s after %s (rule %s)",
				d.bucket, p.prefix, plural(days, "day"), rule)
		} else {
			d.rep.add(CheckAbortIncomplete+p.prefix, StatusFail, "no rule of bucket %s aborts incomplete multipart uploads under %s: the parts of every check-in killed mid-upload stay, and are billed, forever; \"claimcheck lifecycle apply\" installs one (%s), and \"claimcheck sweep\" aborts those older than its grace period",
				d.bucket, p.prefix, plural(lifecycle.DefaultAbortIncompleteDays, "day"))
		}
	}
	return rep.Checks, shortest
}

// abortRule is the shortest AbortIncompleteMultipartUpload of the enabled
// rules covering every upload under prefix (an ancestor prefix, no tag
// or size condition), in days, and that rule's name; 0 when none does.
func abortRule(rules []lifecycle.Rule, prefix string) (int, string) {
	best, name := 0, ""
	for i, r := range rules {
		if r.Disabled || r.Tagged || r.Sized || !strings.HasPrefix(prefix, r.Prefix) {
			continue
		}
		if days := r.AbortIncompleteDays; days > 0 && (best == 0 || days < best) {
			best, name = days, ruleName(r, i)
		}
	}
	return best, name
}

// ruleName is how a report names rule r, the i-th of its bucket: its ID
// quoted, or "#N (no ID)".
func ruleName(r lifecycle.Rule, i int) string {
	if r.ID == "" {
		return fmt.Sprintf("#%d (no ID)", i+1)
	}
	return fmt.Sprintf("%q", r.ID)
}

// checkDeadLetter checks the pipeline's dead-letter retention against the
// retention sum and the payloads' shortest expiry (days, 0 if unknown).
func (d *doctor) checkDeadLetter(shortest int) {
	r := d.o.Retention
	have := d.o.Pipeline.DeadLetterRetention()
	f := claimcheck.FormatDuration
	if have > r.Inputs.DeadLetter {
		d.rep.add(CheckDeadLetter, StatusFail, "the pipeline keeps dead letters %s, but the retention sum counts only %s (--dead-letter %s): payloads of the oldest dead letters would expire first",
			f(have), f(r.Inputs.DeadLetter), f(r.Inputs.DeadLetter))
		return
	}
	// A job may wait, retry, then stay dead for the whole retention: its
	// payload must outlive all three for the dead letter to be replayable.
	need := r.Inputs.Backlog + r.Inputs.RetryWindow + have
	if shortest > 0 {
		life := time.Duration(shortest) * 24 * time.Hour
		if life < need {
			when := "even a fresh dead letter may point at an expired payload"
			if left := life - r.Inputs.Backlog - r.Inputs.RetryWindow; left > 0 {
				when = "a dead letter older than about " + f(left) + " points at an expired payload"
			}
			d.rep.add(CheckDeadLetter, StatusFail, "dead letters are kept %s but payloads expire after %s in bucket %s: %s and cannot be replayed (backlog %s + retry window %s + dead letter %s = %s needed)",
				f(have), plural(shortest, "day"), d.bucket, when, f(r.Inputs.Backlog), f(r.Inputs.RetryWindow), f(have), f(need))
			return
		}
		d.rep.add(CheckDeadLetter, StatusPass, "dead letters are kept %s; their payloads live %s (backlog + retry window + dead letter = %s)", f(have), plural(shortest, "day"), f(need))
		return
	}
	d.rep.add(CheckDeadLetter, StatusPass, "dead letters are kept %s, as the retention sum counts; %s need %s", f(have), claimcheck.PrefixPayloads, plural(r.PayloadDays, "day"))
}

// expiryEval is what a bucket's rules do to objects under one prefix.
type expiryEval struct {
	// cover is the expiry in days of the shortest rule applying to every
	// object under the prefix, and coverRule its name; 0 when none does.
	cover     int
	coverRule string
	// shortest is the shortest expiry in days of any rule reaching some
	// object under the prefix; 0 when none does.
	shortest int
	// problems describe rules that end some objects' readable life before
	// need days; foreign is true when one of them is not claimcheck's.
	problems []string
	foreign  bool
}

// evaluateExpiry applies a bucket's lifecycle rules to the objects under
// prefix. A rule reaches them when it is enabled, carries no tag condition
// (claimcheck never tags objects) and its prefix overlaps; it covers them
// all when its prefix is an ancestor of prefix and it has no size
// condition. S3 acts on the earliest of overlapping expirations.
func evaluateExpiry(rules []lifecycle.Rule, prefix string, need int) expiryEval {
	var e expiryEval
	for i, r := range rules {
		rp := r.Prefix
		if r.Disabled || r.Tagged || !(strings.HasPrefix(rp, prefix) || strings.HasPrefix(prefix, rp)) {
			continue
		}
		name := ruleName(r, i)
		before := len(e.problems)
		scope := "on the whole bucket"
		if rp != "" {
			scope = fmt.Sprintf("on %q", rp)
		}
		if days := r.ExpirationDays; days > 0 {
			if e.shortest == 0 || days < e.shortest {
				e.shortest = days
			}
			if strings.HasPrefix(prefix, rp) && !r.Sized && (e.cover == 0 || days < e.cover) {
				e.cover, e.coverRule = days, name
			}
			if days < need {
				e.problems = append(e.problems, fmt.Sprintf("rule %s, %s, expires objects after %s", name, scope, plural(days, "day")))
			}
		}
		if !r.ExpirationDate.IsZero() {
			e.problems = append(e.problems, fmt.Sprintf("rule %s, %s, expires objects on a fixed date (%s)", name, scope, r.ExpirationDate.UTC().Format("2006-01-02")))
		}
		for _, t := range r.Transitions {
			if !t.Archive {
				continue // readable at once
			}
			if t.Days > 0 && t.Days < need {
				e.problems = append(e.problems, fmt.Sprintf("rule %s, %s, moves objects to %s after %s, where a claim cannot read them", name, scope, t.StorageClass, plural(t.Days, "day")))
			}
			if !t.Date.IsZero() {
				e.problems = append(e.problems, fmt.Sprintf("rule %s, %s, moves objects to %s on a fixed date", name, scope, t.StorageClass))
			}
		}
		if len(e.problems) > before && !strings.HasPrefix(r.ID, lifecycle.IDPrefix) {
			e.foreign = true
		}
	}
	return e
}

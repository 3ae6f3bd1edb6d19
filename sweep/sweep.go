// Package sweep finds and deletes orphaned objects, and enforces expiry
// where the store has no lifecycle engine (the file store).
//
// An orphan is an object under claimcheck's prefixes that no claims-registry
// row refers to and that is older than a grace period (docs/invariants.md, invariant
// 6). The registry row is written in the same transaction as its job, so an
// object without one was checked in by a producer whose transaction rolled
// back or never ran: litter, never a payload some job needs. The grace
// period covers the moment between an upload and its transaction's commit.
// The common recipe's sweep matches objects to jobs by the digest in the key
// and needs a job row; this one matches the exact key against the registry,
// whose rows outlive the job rows River prunes.
//
// An object a producer is checking in is referenced too: pipeline.CheckIn
// commits a check-in intent (claimcheck_intent, timed by the job
// database's clock) before it writes or reuses the object, and the
// transaction that writes the registry row removes it. An object with a
// live intent (one younger than the grace period by the database's clock)
// is kept whatever its age, so a producer paused between its upload and its
// commit never loses its payload, whatever the clocks; an intent older than
// that is its producer's death (or a stall the enqueue then refuses).
//
// Ages are measured against the store's own clock (Store.Clock: the host's
// for file://, the S3 server's Date for s3://), or the job database's when
// the store cannot tell: never against the sweeping process's clock.
//
// Each deletion runs in a transaction of the job database holding the
// object's key lock (internal/claimregistry), which check-ins that reuse an
// object take too: under it the sweep looks the key up again (registry
// rows, intents), removes stale intents, deletes the object from the store
// and commits. A check-in reusing the object either recorded its intent
// first (the object is kept) or waits and finds the object gone (it writes
// it again), so reuse and deletion never leave a dangling ticket.
//
// Never deleted:
//   - an object with a registry row (unless Expiry applies, below), whether
//     its job is queued, running, retrying, dead, completed or already
//     pruned by River;
//   - an object with a live check-in intent;
//   - an object younger than the grace period;
//   - fileblob's "*.attrs" sidecars (they go with their object);
//   - anything outside Options.Prefixes.
//
// Litter is removed: a file store's temporary files ("*.tmp" beside the
// final path) older than the grace period, which a check-in killed
// mid-write leaves, and, on S3, incomplete multipart uploads under the
// swept prefixes initiated more than the grace period ago. A write that
// slow fails its check-in (no ticket is made), so removing its litter
// loses nothing. So are the check-in intents such check-ins leave in the
// job database: an intent older than the grace period (by the database's
// clock) for a key under the swept prefixes with no object, removed under
// the key's lock once the store confirms the object does not exist (an
// intent of an existing object goes with the object's own decision).
//
// Pointer copies (payloads/<tenant>/pointer/<random hex>, written by
// claimcheck.Store.CopyForPointer for one AWS-format message each) have no
// registry row by design: each is kept until it is older than
// Options.PointerRetention, the longest its message can wait in a queue,
// then removed (reason PointerCopy), unless the consumer deleted it first.
//
// Expiry (Options.Expiry, for stores with no lifecycle rules: the file
// store) deletes an object older than its prefix's expiry even if it has a
// registry row, unless a job referring to it is still pending (available,
// running, retryable, scheduled, pending) or dead (cancelled, discarded),
// or a check-in intent holds it: those are kept whatever their age.
//
// Sweep works a page at a time: one listing page, then one registry query
// and one intent query for that page's keys (WHERE object_key IN (…)),
// then its deletions, so memory depends on the page size and not on the
// bucket.
package sweep

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/claimregistry"
	"github.com/claimcheck/claimcheck/internal/dbopen"
)

// Defaults.
const (
	// DefaultGrace is the age below which an unreferenced object is left
	// alone: its producer's transaction may still be open.
	DefaultGrace = 24 * time.Hour
	// MinGrace is the shortest grace period Sweep accepts.
	MinGrace = time.Hour
	// DefaultPageSize is the number of objects listed, and keys looked up,
	// at a time.
	DefaultPageSize = 1000
	// DefaultPointerRetention is how long a pointer copy is kept: 14 days,
	// SQS's longest message retention period (MessageRetentionPeriod,
	// at most 1,209,600 seconds: Amazon SQS API Reference,
	// SetQueueAttributes).
	DefaultPointerRetention = 14 * 24 * time.Hour
	// MaxPageSize bounds PageSize: one registry query carries one bind
	// parameter per key (SQLite allows 32766, PostgreSQL 65535).
	MaxPageSize = 10000
)

// Reason says why an object was removed or kept.
type Reason string

// Reasons. Removed: Orphan, Expired, StaleIntent, and TempFile and
// IncompleteUpload past the grace period. Kept: the others.
const (
	Orphan      Reason = "orphan"       // no registry row, older than the grace period
	Expired     Reason = "expired"      // older than its prefix's expiry, no pending or dead job
	Referenced  Reason = "referenced"   // a registry row refers to it
	TooYoung    Reason = "too-young"    // no registry row yet, but within the grace period
	TempFile    Reason = "temp-file"    // a write's temporary file: removed past the grace period, kept within it
	OtherPrefix Reason = "other-prefix" // outside the swept prefixes: never listed
	CheckingIn  Reason = "checking-in"  // a live check-in intent holds it: its producer has not committed yet
	// IncompleteUpload is an S3 multipart upload never completed: aborted
	// past the grace period, kept within it.
	IncompleteUpload Reason = "incomplete-upload"
	// PointerCopy is a per-message pointer copy
	// (claimcheck.PointerKey): removed once older than PointerRetention,
	// kept within it.
	PointerCopy Reason = "pointer-copy"
	// StaleIntent is a check-in intent older than the grace period whose
	// object was never written (its check-in was killed or failed):
	// always removed. Its entry's Size is 0 and its ModTime zero.
	StaleIntent Reason = "stale-intent"
	// SettledOutcome is a finished handler's outcome record
	// (claimcheck.PrefixOutcomes; docs/invariants.md, invariant 12) older
	// than the grace period whose job is no longer pending: removed. A
	// record of a pending job is kept (Referenced) whatever its age.
	SettledOutcome Reason = "settled-outcome"
)

// Options configure Sweep.
type Options struct {
	// Store is the object store to sweep. Required.
	Store *claimcheck.Store
	// DB is the job database holding the claims registry (claimcheck_claim)
	// and River's jobs (river_job): pipeline.Pipeline.DB(). Required.
	DB *sql.DB
	// Grace is how old an unreferenced object must be to be an orphan.
	// Default DefaultGrace; at least MinGrace.
	Grace time.Duration
	// DryRun decides and reports everything, and deletes nothing.
	DryRun bool
	// Prefixes are the key prefixes swept, each ending in '/', none inside
	// another. Default claimcheck.PrefixPayloads and PrefixResults.
	Prefixes []string
	// PageSize is the number of objects listed, and looked up in the
	// registry, at a time. Default DefaultPageSize, at most MaxPageSize.
	PageSize int
	// Now, when set, replaces the clock ages are measured against (tests,
	// and probes that pretend time has passed). By default it is the
	// store's own clock (claimcheck.Store.Clock), read once at the start and
	// advanced by this process's monotonic clock, or the job database's
	// clock when the store cannot tell; never this process's wall clock.
	// Whatever it says, an object with a registry row or a live check-in
	// intent (timed by the database's clock) is kept.
	Now func() time.Time
	// Expiry maps a prefix (one of Prefixes, or inside one) to the age
	// beyond which its objects are deleted unless a pending or dead job
	// refers to them; the longest matching prefix applies. For stores that
	// enforce no lifecycle rules themselves (file://). Each expiry must be
	// at least Grace.
	Expiry map[string]time.Duration
	// PointerRetention is how long a pointer copy (claimcheck.PointerKey:
	// the object one AWS-format message names, with no registry row) is
	// kept before it is removed: at least the longest time such a message
	// can wait in its queue, retries and dead-letter queue included.
	// Default DefaultPointerRetention; at least Grace.
	PointerRetention time.Duration
	// AllowEmptyRegistry lets Sweep delete orphans while the claims registry
	// has no row at all. Without it Sweep refuses, since every object would
	// then be an orphan: the usual cause is the wrong database.
	AllowEmptyRegistry bool
	// OnEntry, when set, receives each decision as it is made and the
	// Report keeps no Entries, so memory stays bounded however many objects
	// are listed. An error stops the sweep.
	OnEntry func(Entry) error
}

// Entry is one object and what Sweep did with it.
type Entry struct {
	// Key is the full object key. Output meant for people or logs shows
	// Object instead.
	Key string `json:"key,omitempty"`
	// Object is the key redacted (RedactKey): role, tenant and a digest
	// prefix.
	Object string `json:"object"`
	// Removed is true for a deleted object, temporary file or aborted
	// upload (or one a dry run would remove).
	Removed bool   `json:"removed"`
	Reason  Reason `json:"reason"`
	// Detail explains the reason in a sentence.
	Detail  string        `json:"detail"`
	Size    int64         `json:"size"`
	ModTime time.Time     `json:"mod_time"`
	Age     time.Duration `json:"age_ns"`
	// Refs counts the registry rows referring to the object, by the state
	// of their job; nil when none does.
	Refs *Refs `json:"refs,omitempty"`
}

// Refs counts an object's registry rows by the state of their job.
type Refs struct {
	// Jobs is the number of registry rows (jobs) referring to the object.
	Jobs int64 `json:"jobs"`
	// Pending jobs are available, running, retryable, scheduled or pending.
	Pending int64 `json:"pending"`
	// Dead jobs are cancelled or discarded (dead letters).
	Dead int64 `json:"dead"`
	// Pruned jobs have a registry row but no River row any more.
	Pruned int64 `json:"pruned"`
	// Done jobs are completed.
	Done int64 `json:"done"`
	// Job is one referring job's id (the lowest).
	Job int64 `json:"job"`
	// Intents counts live check-in intents (younger than the grace period
	// by the job database's clock); StaleIntents older ones.
	Intents      int64 `json:"intents,omitempty"`
	StaleIntents int64 `json:"stale_intents,omitempty"`
}

// Report is the outcome of a Sweep.
type Report struct {
	DryRun   bool                     `json:"dry_run"`
	Grace    time.Duration            `json:"grace_ns"`
	Prefixes []string                 `json:"prefixes"`
	Expiry   map[string]time.Duration `json:"expiry_ns,omitempty"`
	// Entries lists every decision, unless Options.OnEntry took them.
	Entries []Entry `json:"entries,omitempty"`
	// Listed counts the objects listed under Prefixes (temporary files
	// included); Removed and Kept split every entry, other-prefix ones
	// included in Kept.
	Listed       int   `json:"listed"`
	Removed      int   `json:"removed"`
	RemovedBytes int64 `json:"removed_bytes"`
	Kept         int   `json:"kept"`
	// ByReason counts entries per reason; RemovedByReason the removed ones
	// (temporary files and incomplete uploads can be either).
	ByReason        map[Reason]int `json:"by_reason"`
	RemovedByReason map[Reason]int `json:"removed_by_reason"`
	// Pages is the number of listing pages read under Prefixes, and Queries
	// the number of registry queries made for them (at most one a page).
	Pages   int           `json:"pages"`
	Queries int           `json:"queries"`
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// ErrEmptyRegistry is returned when the claims registry has no rows but
// the store holds orphan candidates (see Options.AllowEmptyRegistry).
var ErrEmptyRegistry = errors.New("the claims registry is empty, so every object would be an orphan")

// Sweep lists the store under each prefix, a page at a time, decides for
// each object whether it is an orphan, expired, or kept, and deletes the
// first two unless DryRun. It returns the report so far with any error.
//
// Errors: claimcheck.ErrConfig for bad Options; ErrEmptyRegistry; the
// store's and the database's errors, wrapped; ctx's error.
func Sweep(ctx context.Context, opts Options) (_ *Report, err error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &sweeper{o: o, bucket: o.Store.Bucket(), dialect: dbopen.DialectOf(o.DB)}
	start := time.Now()
	if err := s.startClock(ctx); err != nil {
		return nil, err
	}
	s.rep = &Report{DryRun: o.DryRun, Grace: o.Grace, Prefixes: o.Prefixes, Expiry: o.Expiry, ByReason: map[Reason]int{}, RemovedByReason: map[Reason]int{}, Started: s.now()}
	defer func() {
		s.rep.Elapsed = time.Since(start)
		record(ctx, o.Store, s.rep, err)
	}()
	if err := s.otherPrefixes(ctx); err != nil {
		return s.rep, err
	}
	for _, prefix := range o.Prefixes {
		if err := s.sweepPrefix(ctx, prefix); err != nil {
			return s.rep, err
		}
		if err := s.sweepUploads(ctx, prefix); err != nil {
			return s.rep, err
		}
	}
	if err := s.sweepIntents(ctx); err != nil {
		return s.rep, err
	}
	if err := s.sweepOutcomes(ctx); err != nil {
		return s.rep, err
	}
	return s.rep, nil
}

// sweepOutcomes removes the outcome records (claimcheck.PrefixOutcomes)
// that are older than the grace period and whose job is not pending: a
// record is read only by a later attempt of its job. A record named by
// a broker message key (not a job id) goes by its age alone.
func (s *sweeper) sweepOutcomes(ctx context.Context) error {
	token := blob.FirstPageToken
	for {
		objs, next, err := s.listPage(ctx, token, &blob.ListOptions{Prefix: claimcheck.PrefixOutcomes})
		if err != nil {
			return claimcheck.StoreError("sweep: list "+claimcheck.PrefixOutcomes, err)
		}
		s.rep.Pages++
		for _, obj := range objs {
			if obj.IsDir || isStoreFile(obj.Key) {
				continue
			}
			s.rep.Listed++
			e := Entry{Key: obj.Key, Object: obj.Key, Size: obj.Size, ModTime: obj.ModTime, Age: age(s.now(), obj.ModTime)}
			pending, err := s.outcomePending(ctx, obj.Key)
			if err != nil {
				return err
			}
			switch {
			case pending:
				e.Reason, e.Detail = Referenced, "the outcome record of a pending job: a later attempt completes the job from it"
			case obj.ModTime.IsZero() || e.Age <= s.o.Grace:
				e.Reason = TooYoung
				e.Detail = fmt.Sprintf("an outcome record %s old (grace period %s)", claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.Grace))
			default:
				e.Removed, e.Reason = true, SettledOutcome
				e.Detail = fmt.Sprintf("the outcome record of a settled job, %s old (grace period %s)", claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.Grace))
				if !s.o.DryRun {
					if err := s.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
						return claimcheck.StoreError("sweep: delete an outcome record", err)
					}
				}
			}
			if err := s.emit(e); err != nil {
				return err
			}
		}
		if len(next) == 0 {
			return nil
		}
		token = next
	}
}

// outcomePending reports whether the job an outcome record's key names
// (outcomes/<job id>-<created>.json) is pending in the job database.
func (s *sweeper) outcomePending(ctx context.Context, key string) (bool, error) {
	name := strings.TrimPrefix(key, claimcheck.PrefixOutcomes)
	idText, _, _ := strings.Cut(name, "-")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil {
		return false, nil // a broker message's record: by age alone
	}
	var n int
	err = s.o.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM river_job WHERE id = $1 AND state IN (`+sqlList(pendingStates)+`)`, id).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("sweep: look up the job of an outcome record: %w", err)
	}
	return n > 0, nil
}

// startClock fixes the clock ages are measured against: Options.Now, or
// the store's, or the job database's.
func (s *sweeper) startClock(ctx context.Context) error {
	s.mono = time.Now()
	if s.o.Now != nil {
		return nil
	}
	now, ok, err := s.o.Store.Clock(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if !ok {
		ms, err := claimregistry.DatabaseNow(ctx, s.o.DB, s.dialect)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		now = time.UnixMilli(ms)
	}
	s.base = now
	return nil
}

// now is the reference clock's current reading.
func (s *sweeper) now() time.Time {
	if s.o.Now != nil {
		return s.o.Now()
	}
	return s.base.Add(time.Since(s.mono))
}

func (o Options) withDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("sweep: "+format+": %w", append(args, claimcheck.ErrConfig)...)
	}
	if o.Store == nil || o.DB == nil {
		return bad("a store and the job database are required")
	}
	switch {
	case o.Grace == 0:
		o.Grace = DefaultGrace
	case o.Grace < MinGrace:
		return bad("grace period %s is below the minimum of %s: an upload whose transaction has not committed yet would be deleted", claimcheck.FormatDuration(o.Grace), claimcheck.FormatDuration(MinGrace))
	}
	switch {
	case o.PointerRetention == 0:
		o.PointerRetention = DefaultPointerRetention
	case o.PointerRetention < o.Grace:
		return bad("pointer retention %s is shorter than the grace period of %s", claimcheck.FormatDuration(o.PointerRetention), claimcheck.FormatDuration(o.Grace))
	}
	if len(o.Prefixes) == 0 {
		o.Prefixes = []string{claimcheck.PrefixPayloads, claimcheck.PrefixResults}
	}
	o.Prefixes = append([]string(nil), o.Prefixes...)
	for i, p := range o.Prefixes {
		if !strings.HasSuffix(p, "/") || p == "/" || strings.HasPrefix(p, "/") {
			return bad("prefix %q must be a folder such as payloads/ (ending in '/', not the whole store)", p)
		}
		for _, q := range o.Prefixes[:i] {
			if strings.HasPrefix(p, q) || strings.HasPrefix(q, p) {
				return bad("prefixes %q and %q overlap", q, p)
			}
		}
	}
	switch {
	case o.PageSize == 0:
		o.PageSize = DefaultPageSize
	case o.PageSize < 1 || o.PageSize > MaxPageSize:
		return bad("page size %d: use 1 to %d", o.PageSize, MaxPageSize)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	exp := make(map[string]time.Duration, len(o.Expiry))
	for p, d := range o.Expiry {
		if d < o.Grace {
			return bad("expiry of %s for %s is shorter than the grace period of %s", claimcheck.FormatDuration(d), p, claimcheck.FormatDuration(o.Grace))
		}
		if prefixOf(o.Prefixes, p) == "" {
			return bad("expiry for %q, which is not under a swept prefix (%s)", p, strings.Join(o.Prefixes, ", "))
		}
		exp[p] = d
	}
	o.Expiry = exp
	return o, nil
}

type sweeper struct {
	o       Options
	bucket  *blob.Bucket
	dialect dbopen.Dialect
	base    time.Time // the reference clock at mono (unless Options.Now)
	mono    time.Time
	rep     *Report
	// registryEmpty: 0 unknown, 1 empty, 2 has rows.
	registryEmpty int
}

func (s *sweeper) emit(e Entry) error {
	if e.Removed {
		s.rep.Removed++
		s.rep.RemovedBytes += e.Size
		s.rep.RemovedByReason[e.Reason]++
	} else {
		s.rep.Kept++
	}
	s.rep.ByReason[e.Reason]++
	if s.o.OnEntry != nil {
		return s.o.OnEntry(e)
	}
	s.rep.Entries = append(s.rep.Entries, e)
	return nil
}

// otherPrefixes reports the top-level folders and objects outside every
// swept prefix, one entry each, from a listing with a delimiter (so a
// foreign folder costs one entry, not one per object).
func (s *sweeper) otherPrefixes(ctx context.Context) error {
	token := blob.FirstPageToken
	for {
		objs, next, err := s.listPage(ctx, token, &blob.ListOptions{Delimiter: "/"})
		if err != nil {
			return claimcheck.StoreError("sweep: list the store's top level", err)
		}
		for _, obj := range objs {
			if s.touchesSwept(obj.Key) || obj.Key == claimcheck.NamespaceMarkerKey || obj.Key == claimcheck.PrefixOutcomes {
				continue
			}
			e := Entry{Key: obj.Key, Object: RedactKey(obj.Key), Reason: OtherPrefix, Size: obj.Size,
				Detail: "outside the swept prefixes (" + strings.Join(s.o.Prefixes, ", ") + "): never listed, never deleted"}
			if obj.IsDir {
				e.Object = obj.Key + "…"
			} else {
				e.ModTime, e.Age = obj.ModTime, age(s.now(), obj.ModTime)
			}
			if err := s.emit(e); err != nil {
				return err
			}
		}
		if len(next) == 0 {
			return nil
		}
		token = next
	}
}

// listPage reads one listing page. The file store's listing fails with
// NotFound when a file it walked is renamed or removed before it is read
// (a check-in committing, a deletion): that page is read again, up to
// five times.
func (s *sweeper) listPage(ctx context.Context, token []byte, opts *blob.ListOptions) ([]*blob.ListObject, []byte, error) {
	for try := 1; ; try++ {
		objs, next, err := s.bucket.ListPage(ctx, token, s.o.PageSize, opts)
		if err == nil || gcerrors.Code(err) != gcerrors.NotFound || try == 5 || ctx.Err() != nil {
			return objs, next, err
		}
	}
}

// touchesSwept reports whether key (a top-level object, or folder ending in
// '/') is inside a swept prefix or an ancestor folder of one.
func (s *sweeper) touchesSwept(key string) bool {
	for _, p := range s.o.Prefixes {
		if strings.HasPrefix(key, p) || strings.HasPrefix(p, key) {
			return true
		}
	}
	return false
}

func (s *sweeper) sweepPrefix(ctx context.Context, prefix string) error {
	token := blob.FirstPageToken
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		objs, next, err := s.listPage(ctx, token, &blob.ListOptions{Prefix: prefix})
		if err != nil {
			return claimcheck.StoreError("sweep: list "+prefix, err)
		}
		s.rep.Pages++
		if err := s.sweepPage(ctx, objs); err != nil {
			return err
		}
		if len(next) == 0 {
			return nil
		}
		token = next
	}
}

func (s *sweeper) sweepPage(ctx context.Context, objs []*blob.ListObject) error {
	var keys []string
	for _, obj := range objs {
		if !obj.IsDir && !isStoreFile(obj.Key) {
			keys = append(keys, obj.Key)
		} else if base, ok := tempBase(obj.Key); ok {
			keys = append(keys, base) // its check-in's intent, if live
		}
	}
	if len(keys) > 0 {
		s.rep.Queries++
	}
	refs, err := s.lookup(ctx, s.o.DB, keys)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if obj.IsDir {
			continue
		}
		s.rep.Listed++
		e := s.decide(obj, refs)
		if e.Removed && !s.o.DryRun {
			if e, err = s.remove(ctx, obj); err != nil {
				return err
			}
		} else if e.Removed && e.Reason == Orphan {
			if err := s.checkRegistryNotEmpty(ctx, s.o.DB); err != nil {
				return err
			}
		}
		if err := s.emit(e); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes what decide chose to delete. A temporary file is
// nobody's and goes at once. An object is deleted in a transaction holding
// its key lock, after the decision is made again on what the registry and
// the intents say under the lock (a check-in may have started to reuse it
// since the page's look-up); stale intents go in the same transaction.
func (s *sweeper) remove(ctx context.Context, obj *blob.ListObject) (Entry, error) {
	if base, ok := tempBase(obj.Key); ok {
		// No lock: no check-in reuses a temporary file, and one whose
		// check-in is still live was kept by decide.
		refs, err := s.lookup(ctx, s.o.DB, []string{base})
		if err != nil {
			return Entry{}, err
		}
		e := s.decide(obj, refs)
		if e.Removed {
			if err := s.o.Store.RemoveTempFile(obj.Key); err != nil {
				return e, fmt.Errorf("sweep: remove %s: %w", e.Object, err)
			}
		}
		return e, nil
	}
	var e Entry
	err := claimregistry.InTx(ctx, s.o.DB, func(tx *sql.Tx) error {
		if err := claimregistry.Lock(ctx, tx, s.dialect, obj.Key); err != nil {
			return err
		}
		refs, err := s.lookup(ctx, tx, []string{obj.Key})
		if err != nil {
			return err
		}
		if e = s.decide(obj, refs); !e.Removed {
			return nil
		}
		if e.Reason == Orphan {
			if err := s.checkRegistryNotEmpty(ctx, tx); err != nil {
				return err
			}
		}
		if _, err := claimregistry.DropStaleIntents(ctx, tx, s.dialect, obj.Key, s.o.Grace.Milliseconds()); err != nil {
			return err
		}
		if err := s.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return claimcheck.StoreError("sweep: delete "+e.Object, err)
		}
		return nil
	})
	if err != nil && !strings.HasPrefix(err.Error(), "sweep: ") {
		err = fmt.Errorf("sweep: %w", err)
	}
	return e, err
}

// decide is the whole policy for one listed object.
func (s *sweeper) decide(obj *blob.ListObject, refs map[string]*Refs) Entry {
	now := s.now()
	e := Entry{Key: obj.Key, Object: RedactKey(obj.Key), Size: obj.Size, ModTime: obj.ModTime, Age: age(now, obj.ModTime)}
	if isStoreFile(obj.Key) {
		e.Reason = TempFile
		base, _ := tempBase(obj.Key)
		switch {
		case !claimcheck.IsTempKey(obj.Key):
			e.Detail = "the store's own sidecar: never deleted (it goes with its object)"
		case refs[base] != nil && refs[base].Intents > 0:
			e.Detail = "a temporary file of a write whose check-in intent is live: in flight, whatever its age"
		case obj.ModTime.IsZero() || e.Age <= s.o.Grace:
			e.Detail = fmt.Sprintf("a temporary file of a write, %s old (grace period %s): it may still be in flight",
				claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.Grace))
		default:
			e.Removed = true
			e.Detail = fmt.Sprintf("a temporary file of a write that never finished, %s old (grace period %s): litter",
				claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.Grace))
		}
		return e
	}
	r := refs[obj.Key]
	e.Refs = r
	if r != nil && r.Intents > 0 {
		e.Reason = CheckingIn
		e.Detail = fmt.Sprintf("%d live check-in intent(s): a producer is checking it in and has not committed yet (intents are timed by the job database's clock)", r.Intents)
		if r.Jobs > 0 {
			e.Detail += "; " + describe(r)
		}
		return e
	}
	if r != nil && r.Jobs == 0 {
		r = nil // only stale intents: their producers are gone
	}
	if obj.ModTime.IsZero() || obj.ModTime.After(now) {
		e.Reason = Referenced
		if r == nil {
			e.Reason = TooYoung
		}
		e.Detail = "the store reports no past modification time, so its age is unknown: kept"
		return e
	}
	if r == nil && claimcheck.PointerKey(obj.Key) {
		e.Reason = PointerCopy
		if e.Age <= s.o.PointerRetention {
			e.Detail = fmt.Sprintf("a pointer copy one AWS-format message names, %s old (pointer retention %s): its message may still be waiting",
				claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.PointerRetention))
			return e
		}
		e.Removed = true
		e.Detail = fmt.Sprintf("a pointer copy %s old, past the pointer retention of %s: its message has been consumed or has expired",
			claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.PointerRetention))
		return e
	}
	if r == nil {
		if e.Age <= s.o.Grace {
			e.Reason = TooYoung
			e.Detail = fmt.Sprintf("no claims-registry row yet, but only %s old (grace period %s): its transaction may still commit",
				claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.Grace))
			return e
		}
		e.Removed, e.Reason = true, Orphan
		e.Detail = fmt.Sprintf("no claims-registry row and %s old (grace period %s)",
			claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.Grace))
		if e.Refs != nil && e.Refs.StaleIntents > 0 {
			e.Detail += fmt.Sprintf("; %d stale check-in intent(s) older than the grace period removed", e.Refs.StaleIntents)
		}
		return e
	}
	e.Reason = Referenced
	exp, prefix := s.expiry(obj.Key)
	if exp > 0 && e.Age > exp {
		if r.Pending+r.Dead > 0 {
			e.Detail = fmt.Sprintf("older than the %s expiry of %s, but %s: kept", claimcheck.FormatDuration(exp), prefix, describe(r))
			return e
		}
		e.Removed, e.Reason = true, Expired
		e.Detail = fmt.Sprintf("older than the %s expiry of %s (%s old); %s", claimcheck.FormatDuration(exp), prefix,
			claimcheck.FormatDuration(e.Age.Truncate(time.Second)), describe(r))
		return e
	}
	e.Detail = describe(r)
	return e
}

// describe says which jobs refer to an object.
func describe(r *Refs) string {
	var parts []string
	add := func(n int64, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(r.Pending, "pending")
	add(r.Dead, "dead")
	add(r.Done, "completed")
	add(r.Pruned, "pruned by River (registry row kept)")
	jobs := "job " + strconv.FormatInt(r.Job, 10)
	if r.Jobs > 1 {
		jobs = fmt.Sprintf("%d jobs (first %d)", r.Jobs, r.Job)
	}
	return "referenced by " + jobs + ": " + strings.Join(parts, ", ")
}

func age(now, t time.Time) time.Duration {
	if t.IsZero() || t.After(now) {
		return 0
	}
	return now.Sub(t)
}

// expiry is the expiry of the longest configured prefix of key, or 0.
func (s *sweeper) expiry(key string) (time.Duration, string) {
	best := ""
	for p := range s.o.Expiry {
		if strings.HasPrefix(key, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return 0, ""
	}
	return s.o.Expiry[best], best
}

// The states of a job that still has work ahead of it, and of a dead letter.
var (
	pendingStates = []string{"available", "running", "retryable", "scheduled", "pending"}
	deadStates    = []string{"cancelled", "discarded"}
)

func sqlList(states []string) string {
	return "'" + strings.Join(states, "','") + "'"
}

// lookupQuery counts, per key, the registry rows referring to it by the
// state of their River job (NULL once River has pruned it). Portable SQL
// with $N placeholders: SQLite and PostgreSQL (where state is an enum that
// compares with these literals).
var lookupQuery = `SELECT c.object_key, COUNT(*), MIN(c.job_id),
	SUM(CASE WHEN j.state IN (` + sqlList(pendingStates) + `) THEN 1 ELSE 0 END),
	SUM(CASE WHEN j.state IN (` + sqlList(deadStates) + `) THEN 1 ELSE 0 END),
	SUM(CASE WHEN j.id IS NULL THEN 1 ELSE 0 END)
FROM claimcheck_claim c LEFT JOIN river_job j ON j.id = c.job_id
WHERE c.object_key IN (%s)
GROUP BY c.object_key`

// lookup runs one registry query and one intent query for keys, on q
// (the database, or a deletion's transaction).
func (s *sweeper) lookup(ctx context.Context, q claimregistry.Querier, keys []string) (map[string]*Refs, error) {
	refs := map[string]*Refs{}
	if len(keys) == 0 {
		return refs, nil
	}
	marks, args := claimregistry.Placeholders(keys, 1)
	rows, err := q.QueryContext(ctx, fmt.Sprintf(lookupQuery, marks), args...)
	if err != nil {
		return nil, fmt.Errorf("sweep: query the claims registry: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		r := &Refs{}
		if err := rows.Scan(&key, &r.Jobs, &r.Job, &r.Pending, &r.Dead, &r.Pruned); err != nil {
			return nil, fmt.Errorf("sweep: read the claims registry: %w", err)
		}
		r.Done = r.Jobs - r.Pending - r.Dead - r.Pruned // completed (the only other state)
		refs[key] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sweep: read the claims registry: %w", err)
	}
	intents, err := claimregistry.IntentCounts(ctx, q, s.dialect, keys, s.o.Grace.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	for k, n := range intents {
		r := refs[k]
		if r == nil {
			r = &Refs{}
			refs[k] = r
		}
		r.Intents, r.StaleIntents = n[0], n[1]
	}
	return refs, nil
}

func (s *sweeper) checkRegistryNotEmpty(ctx context.Context, q claimregistry.Querier) error {
	if s.registryEmpty == 0 {
		var n int64
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM claimcheck_claim LIMIT 1) AS t`).Scan(&n); err != nil {
			return fmt.Errorf("sweep: query the claims registry: %w", err)
		}
		s.registryEmpty = 2
		if n == 0 {
			s.registryEmpty = 1
		}
	}
	if s.registryEmpty == 1 && !s.o.AllowEmptyRegistry {
		return fmt.Errorf("sweep: %w: check that the job database is this store's (or allow an empty registry if no job was ever enqueued)", ErrEmptyRegistry)
	}
	return nil
}

// sweepUploads reports the store's incomplete multipart uploads under
// prefix and aborts those initiated more than the grace period ago.
func (s *sweeper) sweepUploads(ctx context.Context, prefix string) error {
	return s.o.Store.IncompleteUploads(ctx, prefix, func(u claimcheck.IncompleteUpload) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := Entry{Key: u.Key, Object: RedactKey(u.Key), Reason: IncompleteUpload, Size: u.Size, ModTime: u.Initiated, Age: age(s.now(), u.Initiated)}
		s.rep.Listed++
		refs, err := s.lookup(ctx, s.o.DB, []string{u.Key})
		if err != nil {
			return err
		}
		if r := refs[u.Key]; r != nil && r.Intents > 0 {
			e.Refs = r
			e.Detail = "a multipart upload whose check-in intent is live: in flight, whatever its age"
			return s.emit(e)
		}
		if u.Initiated.IsZero() || e.Age <= s.o.Grace {
			e.Detail = fmt.Sprintf("a multipart upload begun %s ago (grace period %s): it may still be in flight",
				claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.Grace))
			return s.emit(e)
		}
		e.Removed = true
		e.Detail = fmt.Sprintf("a multipart upload begun %s ago and never completed (grace period %s): aborted, its parts freed",
			claimcheck.FormatDuration(e.Age.Truncate(time.Second)), claimcheck.FormatDuration(s.o.Grace))
		if !s.o.DryRun {
			if err := s.o.Store.AbortUpload(ctx, u); err != nil {
				return fmt.Errorf("sweep: abort %s: %w", e.Object, err)
			}
		}
		return s.emit(e)
	})
}

// sweepIntents removes the stale check-in intents of keys under the swept
// prefixes whose object does not exist, a page of keys at a time: what
// check-ins killed before their object was written leave. Each key is
// decided in a transaction holding its key lock, so a check-in that
// records a new intent meanwhile (it takes the lock too) keeps its own, and
// a stale intent whose object exists is left to that object's decision.
func (s *sweeper) sweepIntents(ctx context.Context) error {
	after := ""
	for {
		keys, err := claimregistry.StaleIntentKeys(ctx, s.o.DB, s.dialect, after, s.o.Grace.Milliseconds(), s.o.PageSize)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		for _, key := range keys {
			if prefixOf(s.o.Prefixes, key) == "" {
				continue
			}
			if err := s.removeStaleIntents(ctx, key); err != nil {
				return err
			}
		}
		if len(keys) < s.o.PageSize {
			return nil
		}
		after = keys[len(keys)-1]
	}
}

func (s *sweeper) removeStaleIntents(ctx context.Context, key string) error {
	var n int64
	err := claimregistry.InTx(ctx, s.o.DB, func(tx *sql.Tx) error {
		if err := claimregistry.Lock(ctx, tx, s.dialect, key); err != nil {
			return err
		}
		ok, err := s.bucket.Exists(ctx, key)
		if err != nil {
			return claimcheck.StoreError("sweep: look up "+RedactKey(key), err)
		}
		if ok {
			return nil
		}
		if s.o.DryRun {
			counts, err := claimregistry.IntentCounts(ctx, tx, s.dialect, []string{key}, s.o.Grace.Milliseconds())
			n = counts[key][1]
			return err
		}
		n, err = claimregistry.DropStaleIntents(ctx, tx, s.dialect, key, s.o.Grace.Milliseconds())
		return err
	})
	if err != nil {
		if !strings.HasPrefix(err.Error(), "sweep: ") {
			err = fmt.Errorf("sweep: %w", err)
		}
		return err
	}
	if n == 0 {
		return nil
	}
	return s.emit(Entry{Key: key, Object: RedactKey(key), Removed: true, Reason: StaleIntent, Refs: &Refs{StaleIntents: n},
		Detail: fmt.Sprintf("%d check-in intent(s) older than the grace period of %s by the job database's clock, for an object never written (its check-in was killed or failed): removed",
			n, claimcheck.FormatDuration(s.o.Grace))})
}

// tempBase is the key a file store's temporary file is being written
// for ("<key>.<hex>.tmp", fileblob's naming), if key is one.
func tempBase(key string) (string, bool) {
	if !claimcheck.IsTempKey(key) {
		return "", false
	}
	base := strings.TrimSuffix(key, ".tmp")
	i := strings.LastIndexByte(base, '.')
	if i <= 0 {
		return "", false
	}
	return base[:i], true
}

// isStoreFile reports a key that is the store's own file rather than an
// object: an in-flight write's temporary file or a fileblob sidecar.
func isStoreFile(key string) bool {
	return claimcheck.IsTempKey(key) || strings.HasSuffix(key, ".attrs")
}

func prefixOf(prefixes []string, p string) string {
	for _, q := range prefixes {
		if strings.HasPrefix(p, q) {
			return q
		}
	}
	return ""
}

// RedactKey shows a key the way claimcheck's output shows keys: role and
// tenant prefix, then, for a content-addressed key, the first 12 hex
// characters of its digest ("payloads/acme/…3f2a9c1b7d4e"), or for any
// other key (named, or not claimcheck's) the first 12 hex characters of the
// key's own SHA-256 after '#' ("payloads/acme/…#5be0c1d2e3f4"), so names
// are never shown yet entries stay tellable apart.
func RedactKey(key string) string {
	for _, role := range []string{claimcheck.PrefixPayloads, claimcheck.PrefixResults} {
		rest, ok := strings.CutPrefix(key, role)
		if !ok {
			continue
		}
		tenant, tail, ok := strings.Cut(rest, "/")
		if !ok || claimcheck.ValidateTenant(tenant) != nil {
			return role + "…#" + keyHash(key)
		}
		last := tail[strings.LastIndexByte(tail, '/')+1:]
		base, suffix, _ := strings.Cut(last, ".")
		if isHex64(base) {
			switch {
			case strings.HasSuffix(last, ".tmp"):
				return role + tenant + "/…" + base[:12] + ".tmp"
			case suffix == "attrs":
				return role + tenant + "/…" + base[:12] + ".attrs"
			case suffix == "":
				return role + tenant + "/…" + base[:12]
			}
		}
		return role + tenant + "/…#" + keyHash(key)
	}
	if i := strings.IndexByte(key, '/'); i > 0 {
		return key[:i+1] + "…#" + keyHash(key)
	}
	return "…#" + keyHash(key)
}

func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// SortedReasons lists the reasons of counts in a stable order: removed
// reasons first.
func SortedReasons(counts map[Reason]int) []Reason {
	order := map[Reason]int{Orphan: 0, Expired: 1, TempFile: 2, IncompleteUpload: 3, StaleIntent: 4, SettledOutcome: 5, Referenced: 6, CheckingIn: 7, TooYoung: 8, OtherPrefix: 9}
	out := make([]Reason, 0, len(counts))
	for r := range counts {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		oi, iok := order[out[i]]
		oj, jok := order[out[j]]
		if !iok {
			oi = 99
		}
		if !jok {
			oj = 99
		}
		if oi != oj {
			return oi < oj
		}
		return out[i] < out[j]
	})
	return out
}

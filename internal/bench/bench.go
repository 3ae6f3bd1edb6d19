// Package bench measures claimcheck's time and memory per payload size: it
// checks a generated payload in, claims it back in verified mode
// (Payload.Open) and in streaming mode (Payload.OpenStream), and records
// elapsed time, throughput, the process's peak RSS and Go's peak heap for
// each phase. It backs the `claimcheck bench` subcommand and answers the
// project's memory question: peak memory must not grow with the payload
// (under 64 MiB for 1 GiB, within 16 MiB of the 4 MiB figure).
//
// Each size is measured for each variant: unencrypted, and encrypted at
// rest (Options.Keeper: a streaming-AEAD data key per payload, wrapped by a
// local key by default). The run reports encrypted throughput as a share of
// unencrypted throughput, per phase, measured in the same run, and checks
// it against MinEncryptedRatio; the memory checks apply to both variants.
//
// Measurements are process-wide (RSS, heap, GC), so Run calls are
// serialized and the process should do nothing else meanwhile.
package bench

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"gocloud.dev/secrets"
	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// Units, in bytes.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
)

// The project's memory targets (bytes), checked by Run.
const (
	// LimitPeakRSS bounds the peak RSS of the largest size's phases.
	LimitPeakRSS = 64 * MiB
	// LimitPeakGrowth bounds how much the largest size's peak RSS may exceed
	// the smallest size's.
	LimitPeakGrowth = 16 * MiB
)

// MinEncryptedRatio is the lowest acceptable encrypted throughput, as a
// share of unencrypted throughput for the same phase and size in the same
// run (the requirement: encryption costs at most a quarter).
const MinEncryptedRatio = 0.75

// Variants, as recorded in Result.Variant.
const (
	// VariantPlain stores payloads as they are.
	VariantPlain = "plain"
	// VariantEncrypted encrypts every payload at rest (Options.Keeper).
	VariantEncrypted = "encrypted"
)

// DefaultVariants are the variants Run measures when Config.Variants is
// empty: both, so that one run compares them.
var DefaultVariants = []string{VariantPlain, VariantEncrypted}

// MaxBaselineSize is the largest size the io.ReadAll baseline is run for:
// it holds the whole payload in memory, so it is skipped when the smallest
// size is larger.
const MaxBaselineSize = 64 * MiB

// DefaultSizes are the payload sizes Run measures when Config.Sizes is empty.
var DefaultSizes = []int64{4 * MiB, 1 * GiB}

// Phases, as recorded in Result.Phase.
const (
	// PhaseCheckIn is Store.CheckIn of the generated stream.
	PhaseCheckIn = "checkin"
	// PhaseOpen is Claim, Payload.Open (fetch, verify and spool) and reading
	// the verified copy to the end, then Payload.Close.
	PhaseOpen = "open"
	// PhaseStream is Claim and Payload.OpenStream read to EOF.
	PhaseStream = "stream"
	// PhaseNaive is the baseline: io.ReadAll of the same stream, the
	// hold-it-in-memory approach. Run measures it for the smallest size only.
	PhaseNaive = "naive-readall"
)

// Config configures Run. The zero value measures DefaultSizes against a
// file:// store in a temporary directory under os.TempDir().
type Config struct {
	// StoreURL is the store to benchmark (gocloud.dev/blob URL, a scheme the
	// claimcheck package registers). Default: file://<tmp>/store, with <tmp>
	// a fresh directory under Dir, removed when Run returns. A mem:// store
	// holds payloads in this process's memory, so its RSS grows with size.
	StoreURL string
	// Dir is the parent of Run's temporary directory (store and spool by
	// default). Default os.TempDir(). It needs about twice the largest size
	// free: on tmpfs that is RAM, though not this process's RSS.
	Dir string
	// SpoolDir is claimcheck's Options.SpoolDir. Default <tmp>/spool.
	SpoolDir string
	// Sizes are the payload sizes in bytes, each > 0. Default DefaultSizes.
	Sizes []int64
	// Tenant checks the payloads in. Default "bench".
	Tenant string
	// Seed selects the generated content; the stream for a size is a
	// deterministic function of Seed and the size.
	Seed uint64
	// NoBaseline skips the io.ReadAll baseline of the smallest size (never
	// run above MaxBaselineSize).
	NoBaseline bool
	// SampleInterval is how often the Go heap (and RSS, when its peak cannot
	// be reset) is sampled. Default 5ms.
	SampleInterval time.Duration
	// Log, if set, receives a line as each phase completes.
	Log io.Writer
	// Variants are the store configurations measured for every size, in
	// this order: VariantPlain, VariantEncrypted. Default DefaultVariants.
	// The throughput checks need both.
	Variants []string
	// Keeper encrypts the encrypted variant's payloads. Default: a
	// localsecrets keeper under a fresh random key, closed when Run returns.
	Keeper *secrets.Keeper
	// Rounds measures each size this many times per variant, alternating
	// the variants' order from round to round, and reports each phase's
	// fastest round (with the highest peaks of all rounds): on a shared
	// machine one round's throughput is noisy. Default 1.
	Rounds int
}

// Result is one measured phase of one size.
type Result struct {
	Size  int64  `json:"size_bytes"`
	Phase string `json:"phase"`
	// Variant is VariantPlain or VariantEncrypted; empty for the baseline.
	Variant   string  `json:"variant"`
	Seconds   float64 `json:"seconds"`
	MiBPerSec float64 `json:"mib_per_s"`
	// StartRSS is the process's RSS as the phase started, after GC and
	// returning free memory to the OS: the floor PeakRSS rose from.
	StartRSS uint64 `json:"start_rss_bytes"`
	// PeakRSS is the process's peak resident set during the phase.
	PeakRSS uint64 `json:"peak_rss_bytes"`
	// PeakHeap is the peak of /memory/classes/heap/objects:bytes (live and
	// not-yet-swept objects), sampled.
	PeakHeap uint64 `json:"peak_heap_bytes"`
	// SHA256 is the digest of the bytes the phase handled: the ticket's digest
	// for check-in, the digest the bench computed over what it read for the
	// claim phases.
	SHA256 string `json:"sha256"`
	// Verified reports that SHA256 and the byte count matched both the
	// ticket and the generated stream.
	Verified bool `json:"verified"`
	// Deduplicated reports that the object already existed, so the check-in
	// wrote nothing (a run against a store holding a previous run's object).
	Deduplicated bool `json:"deduplicated,omitempty"`
	// Rounds is how many measurements this result summarizes: Seconds and
	// MiBPerSec are the fastest round's, PeakRSS and PeakHeap the highest.
	Rounds int `json:"rounds,omitempty"`
}

// Check is one of the project's memory targets, judged on this run.
type Check struct {
	Name string `json:"name"`
	// Status is "PASS", "FAIL", or "SKIP" when RSS is unavailable or the
	// check needs a second size.
	Status   string  `json:"status"`
	ValueMiB float64 `json:"value_mib"`
	LimitMiB float64 `json:"limit_mib"`
	// Ratio and MinRatio are set, instead of ValueMiB and LimitMiB, by a
	// throughput check: encrypted MiB/s over plain MiB/s, and its minimum.
	Ratio    float64 `json:"ratio,omitempty"`
	MinRatio float64 `json:"min_ratio,omitempty"`
	Detail   string  `json:"detail"`
}

// Report is the outcome of Run. Its fields marshal as the --json form.
type Report struct {
	Store          string   `json:"store"` // scheme, host and path only
	SpoolDir       string   `json:"spool_dir"`
	GoVersion      string   `json:"go_version"`
	OS             string   `json:"os"`
	Arch           string   `json:"arch"`
	NumCPU         int      `json:"num_cpu"`
	GOMAXPROCS     int      `json:"gomaxprocs"`
	RSSMethod      string   `json:"rss_method"`
	SampleInterval string   `json:"sample_interval"`
	Seed           uint64   `json:"seed"`
	Rounds         int      `json:"rounds"`
	Results        []Result `json:"results"`
	Checks         []Check  `json:"checks"`
}

// runMu serializes Run: measurements are process-wide.
var runMu sync.Mutex

// Run measures each size in turn (check-in, verified claim, streaming
// claim), then the io.ReadAll baseline for the smallest size. Each phase starts
// after runtime.GC and debug.FreeOSMemory. The object is deleted after its
// size is measured. An error is returned if any phase fails or any digest
// or size does not match.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	runMu.Lock()
	defer runMu.Unlock()

	sizes := cfg.Sizes
	if len(sizes) == 0 {
		sizes = DefaultSizes
	}
	for _, n := range sizes {
		if n <= 0 {
			return nil, fmt.Errorf("bench: size %d: sizes must be positive", n)
		}
	}
	tenant := cfg.Tenant
	if tenant == "" {
		tenant = "bench"
	}
	if err := claimcheck.ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	variants := cfg.Variants
	if len(variants) == 0 {
		variants = DefaultVariants
	}
	for i, v := range variants {
		if (v != VariantPlain && v != VariantEncrypted) || slices.Contains(variants[:i], v) {
			return nil, fmt.Errorf("bench: variant %q: want %q or %q, each at most once", v, VariantPlain, VariantEncrypted)
		}
	}
	interval := cfg.SampleInterval
	if interval <= 0 {
		interval = 5 * time.Millisecond
	}

	storeURL, spoolDir := cfg.StoreURL, cfg.SpoolDir
	if storeURL == "" || spoolDir == "" {
		tmp, err := os.MkdirTemp(cfg.Dir, "claimcheck-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(tmp)
		if tmp, err = filepath.Abs(tmp); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if storeURL == "" {
			storeURL = "file://" + filepath.ToSlash(filepath.Join(tmp, "store"))
		}
		if spoolDir == "" {
			spoolDir = filepath.Join(tmp, "spool")
		}
	}
	m := &meter{method: detectRSSMethod(), interval: interval}
	rep := &Report{
		Store:          redactURL(storeURL),
		SpoolDir:       spoolDir,
		GoVersion:      runtime.Version(),
		OS:             runtime.GOOS,
		Arch:           runtime.GOARCH,
		NumCPU:         runtime.NumCPU(),
		GOMAXPROCS:     runtime.GOMAXPROCS(0),
		RSSMethod:      m.method,
		SampleInterval: interval.String(),
		Seed:           cfg.Seed,
		Rounds:         max(cfg.Rounds, 1),
	}
	var runners []*runner
	for _, v := range variants {
		opts := &claimcheck.Options{SpoolDir: spoolDir}
		vtenant := tenant
		if v == VariantEncrypted {
			if opts.Keeper = cfg.Keeper; opts.Keeper == nil {
				key, err := localsecrets.NewRandomKey()
				if err != nil {
					return nil, fmt.Errorf("bench: %w", err)
				}
				opts.Keeper = localsecrets.NewKeeper(key)
				defer opts.Keeper.Close()
			}
			// Its own prefix: an encrypting store refuses to deduplicate
			// against an unencrypted object at the same key.
			vtenant = tenant[:min(len(tenant), claimcheck.MaxTenantLen-len("-enc"))] + "-enc"
		}
		store, err := claimcheck.OpenStore(ctx, storeURL, opts)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", v, err)
		}
		defer store.Close()
		runners = append(runners, &runner{ctx: ctx, store: store, tenant: vtenant, variant: v, seed: cfg.Seed, meter: m, log: cfg.Log})
	}

	// Warm up: fault in the code and buffers every phase uses, so that the
	// first measured size does not pay for first use.
	for _, b := range runners {
		if err := b.warmUp(); err != nil {
			return nil, err
		}
	}
	smallest := sizes[0]
	for _, n := range sizes {
		smallest = min(smallest, n)
	}
	// Variants alternate within each size (and their order from round to
	// round), so that both see the same machine state (page cache, disk,
	// neighbours) for the comparison.
	for _, n := range sizes {
		rounds := map[string][][]Result{}
		for round := range rep.Rounds {
			order := slices.Clone(runners)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, b := range order {
				rs, err := b.size(n)
				if err != nil {
					return nil, err
				}
				rounds[b.variant] = append(rounds[b.variant], rs)
			}
		}
		for _, b := range runners {
			rep.Results = append(rep.Results, fastest(rounds[b.variant])...)
		}
	}
	b := runners[0]
	// The baseline runs last: the heap it grows leaves the runtime holding
	// some memory (about 2 MiB after a 4 MiB ReadAll, measured) that would
	// otherwise raise the floor of every later measurement.
	if !cfg.NoBaseline && smallest <= MaxBaselineSize {
		r, err := b.naive(smallest)
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, r)
	}
	rep.Checks = rep.check(sizes, variants)
	return rep, nil
}

// fastest summarizes rounds of one size and variant, phase by phase: the
// fastest round's time, the highest peaks, verified only if every round was.
func fastest(rounds [][]Result) []Result {
	out := slices.Clone(rounds[0])
	for i := range out {
		for _, rs := range rounds[1:] {
			r := rs[i]
			best := out[i]
			if r.Seconds < best.Seconds {
				best = r
			}
			best.PeakRSS = max(out[i].PeakRSS, r.PeakRSS)
			best.PeakHeap = max(out[i].PeakHeap, r.PeakHeap)
			best.Verified = out[i].Verified && r.Verified
			best.Deduplicated = out[i].Deduplicated || r.Deduplicated
			out[i] = best
		}
		out[i].Rounds = len(rounds)
	}
	return out
}

type runner struct {
	ctx     context.Context
	store   *claimcheck.Store
	tenant  string
	variant string
	seed    uint64
	meter   *meter
	log     io.Writer
}

// stream returns the deterministic pseudo-random payload of n bytes:
// ChaCha8 keyed by the seed and the size, generated as it is read.
func stream(seed uint64, n int64) io.Reader {
	var key [32]byte
	copy(key[:], "claimcheck/bench")
	binary.LittleEndian.PutUint64(key[16:], seed)
	binary.LittleEndian.PutUint64(key[24:], uint64(n))
	return io.LimitReader(rand.NewChaCha8(key), n)
}

// digest is the hex SHA-256 of the payload of n bytes, computed without
// holding it.
func digest(ctx context.Context, seed uint64, n int64) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, stream(seed, n)}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (b *runner) warmUp() error {
	const n = 1 * MiB
	t, err := b.store.CheckIn(b.ctx, b.tenant, stream(^b.seed, n), nil)
	if err != nil {
		return fmt.Errorf("bench: warm-up: %w", err)
	}
	defer b.delete(t)
	for _, phase := range []string{PhaseOpen, PhaseStream} {
		if _, _, err := b.claim(t, phase); err != nil {
			return fmt.Errorf("bench: warm-up: %w", err)
		}
	}
	return nil
}

// size measures the three phases of one size and deletes the object.
func (b *runner) size(n int64) ([]Result, error) {
	want, err := digest(b.ctx, b.seed, n) // outside any timed phase
	if err != nil {
		return nil, err
	}
	var t *claimcheck.Ticket
	var dedup bool
	s, err := b.meter.measure(func() error {
		start := time.Now()
		var err error
		if t, err = b.store.CheckIn(b.ctx, b.tenant, stream(b.seed, n), nil); err != nil {
			return err
		}
		dedup = b.existedBefore(t, start)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %s check-in: %w", FormatSize(n), err)
	}
	if !dedup && !t.IsInline() {
		defer b.delete(t)
	}
	res := []Result{b.result(n, PhaseCheckIn, s, t.SHA256, t.Size, t, want)}
	res[0].Deduplicated = dedup
	b.logResult(res[0])
	if !res[0].Verified {
		return res, fmt.Errorf("bench: %s check-in: ticket (size %d, sha256 %s) does not match the generated stream (size %d, sha256 %s)",
			FormatSize(n), t.Size, t.SHA256, n, want)
	}
	for _, phase := range []string{PhaseOpen, PhaseStream} {
		var sum string
		var read int64
		s, err := b.meter.measure(func() error {
			var err error
			sum, read, err = b.claim(t, phase)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("bench: %s %s: %w", FormatSize(n), phase, err)
		}
		r := b.result(n, phase, s, sum, read, t, want)
		res = append(res, r)
		b.logResult(r)
		if !r.Verified {
			return res, fmt.Errorf("bench: %s %s: read %d bytes with sha256 %s, ticket says %d bytes, %s",
				FormatSize(n), phase, read, sum, t.Size, t.SHA256)
		}
	}
	return res, nil
}

// claim claims t and reads the payload to the end in the given mode,
// hashing what it reads.
func (b *runner) claim(t *claimcheck.Ticket, phase string) (sum string, n int64, err error) {
	p, err := b.store.Claim(t)
	if err != nil {
		return "", 0, err
	}
	defer func() {
		if cerr := p.Close(); err == nil {
			err = cerr
		}
	}()
	var r io.ReadCloser
	switch phase {
	case PhaseOpen:
		r, err = p.Open(b.ctx)
	case PhaseStream:
		r, err = p.OpenStream(b.ctx)
	default:
		panic("bench: unknown phase " + phase)
	}
	if err != nil {
		return "", 0, err
	}
	defer func() {
		if cerr := r.Close(); err == nil {
			err = cerr
		}
	}()
	h := sha256.New()
	n, err = io.Copy(io.MultiWriter(io.Discard, h), r)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// naive measures io.ReadAll of the stream of n bytes: the payload in memory.
func (b *runner) naive(n int64) (Result, error) {
	want, err := digest(b.ctx, b.seed, n)
	if err != nil {
		return Result{}, err
	}
	var sum string
	var got int64
	s, err := b.meter.measure(func() error {
		buf, err := io.ReadAll(stream(b.seed, n))
		if err != nil {
			return err
		}
		h := sha256.Sum256(buf)
		sum, got = hex.EncodeToString(h[:]), int64(len(buf))
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("bench: %s %s: %w", FormatSize(n), PhaseNaive, err)
	}
	r := b.result(n, PhaseNaive, s, sum, got, nil, want)
	r.Variant = "" // no store involved
	b.logResult(r)
	return r, nil
}

func (b *runner) result(n int64, phase string, s sample, sum string, got int64, t *claimcheck.Ticket, want string) Result {
	secs := s.elapsed.Seconds()
	r := Result{
		Size:     n,
		Phase:    phase,
		Variant:  b.variant,
		Seconds:  secs,
		StartRSS: s.startRSS,
		PeakRSS:  s.peakRSS,
		PeakHeap: s.peakHeap,
		SHA256:   sum,
		Verified: got == n && sum == want && (t == nil || (t.Size == n && t.SHA256 == want)),
	}
	if secs > 0 {
		r.MiBPerSec = float64(n) / MiB / secs
	}
	return r
}

// existedBefore reports whether t's object was there before start: fileblob
// keeps the write's modification time, so an object CheckIn wrote is newer.
func (b *runner) existedBefore(t *claimcheck.Ticket, start time.Time) bool {
	if t.IsInline() {
		return false
	}
	a, err := b.store.Bucket().Attributes(b.ctx, t.Key)
	return err == nil && !a.ModTime.IsZero() && a.ModTime.Before(start.Add(-time.Second))
}

func (b *runner) delete(t *claimcheck.Ticket) {
	if t == nil || t.IsInline() {
		return
	}
	_ = b.store.Bucket().Delete(context.WithoutCancel(b.ctx), t.Key)
}

func (b *runner) logResult(r Result) {
	if b.log == nil {
		return
	}
	fmt.Fprintf(b.log, "bench: %-8s %-9s %-13s %8.3fs %9.1f MiB/s  peak RSS %6.1f MiB  peak heap %6.1f MiB  verified=%t\n",
		FormatSize(r.Size), r.Variant, r.Phase, r.Seconds, r.MiBPerSec, mib(r.PeakRSS), mib(r.PeakHeap), r.Verified)
}

// PeakRSS is the highest peak RSS among the claimcheck phases (not the
// baseline) of the given size, in any variant, and whether that size was
// measured.
func (r *Report) PeakRSS(size int64) (uint64, bool) {
	return r.PeakRSSOf(size, "")
}

// PeakRSSOf is PeakRSS for one variant ("" for any).
func (r *Report) PeakRSSOf(size int64, variant string) (uint64, bool) {
	var peak uint64
	var found bool
	for _, res := range r.Results {
		if res.Size == size && res.Phase != PhaseNaive && (variant == "" || res.Variant == variant) {
			peak, found = max(peak, res.PeakRSS), true
		}
	}
	return peak, found
}

// Result returns the result of one size, variant and phase, if measured.
func (r *Report) Result(size int64, variant, phase string) (Result, bool) {
	for _, res := range r.Results {
		if res.Size == size && res.Variant == variant && res.Phase == phase {
			return res, true
		}
	}
	return Result{}, false
}

// Ratio is encrypted over plain throughput for one size and phase, and
// whether both were measured.
func (r *Report) Ratio(size int64, phase string) (float64, bool) {
	p, okp := r.Result(size, VariantPlain, phase)
	e, oke := r.Result(size, VariantEncrypted, phase)
	if !okp || !oke || p.MiBPerSec <= 0 {
		return 0, false
	}
	return e.MiBPerSec / p.MiBPerSec, true
}

// Passed reports whether no check failed.
func (r *Report) Passed() bool {
	for _, c := range r.Checks {
		if c.Status == "FAIL" {
			return false
		}
	}
	return true
}

func (r *Report) check(sizes []int64, variants []string) []Check {
	lo, hi := sizes[0], sizes[0]
	for _, n := range sizes {
		lo, hi = min(lo, n), max(hi, n)
	}
	var checks []Check
	for _, v := range variants {
		checks = append(checks, r.memoryChecks(lo, hi, v)...)
	}
	if slices.Contains(variants, VariantPlain) && slices.Contains(variants, VariantEncrypted) {
		for _, phase := range []string{PhaseCheckIn, PhaseOpen, PhaseStream} {
			ratio, _ := r.Ratio(hi, phase)
			p, _ := r.Result(hi, VariantPlain, phase)
			e, _ := r.Result(hi, VariantEncrypted, phase)
			checks = append(checks, Check{
				Name:     fmt.Sprintf("encrypted %s throughput for %s at least %.0f%% of plain", phase, FormatSize(hi), MinEncryptedRatio*100),
				Status:   passFail(ratio >= MinEncryptedRatio),
				Ratio:    ratio,
				MinRatio: MinEncryptedRatio,
				Detail:   fmt.Sprintf("%.1f MiB/s encrypted, %.1f MiB/s plain, same run", e.MiBPerSec, p.MiBPerSec),
			})
		}
	}
	return checks
}

// memoryChecks are the project's memory targets for one variant.
func (r *Report) memoryChecks(lo, hi int64, variant string) []Check {
	peakHi, _ := r.PeakRSSOf(hi, variant)
	peakLo, _ := r.PeakRSSOf(lo, variant)
	abs := Check{
		Name:     fmt.Sprintf("%s: peak RSS for %s under %s", variant, FormatSize(hi), FormatSize(LimitPeakRSS)),
		ValueMiB: mib(peakHi),
		LimitMiB: mib(LimitPeakRSS),
		Detail:   fmt.Sprintf("highest VmHWM of the %s check-in, open and stream phases of %s", variant, FormatSize(hi)),
	}
	growth := Check{
		Name:     fmt.Sprintf("%s: peak RSS for %s within %s of %s", variant, FormatSize(hi), FormatSize(LimitPeakGrowth), FormatSize(lo)),
		ValueMiB: mib(peakHi) - mib(peakLo),
		LimitMiB: mib(LimitPeakGrowth),
		Detail:   fmt.Sprintf("%.1f MiB - %.1f MiB", mib(peakHi), mib(peakLo)),
	}
	abs.Status = passFail(peakHi < LimitPeakRSS)
	growth.Status = passFail(peakHi < peakLo || peakHi-peakLo <= LimitPeakGrowth)
	switch {
	case r.RSSMethod == RSSMethodNone:
		abs.Status, abs.Detail = "SKIP", "RSS unavailable on this platform"
		growth.Status, growth.Detail = "SKIP", abs.Detail
	case lo == hi:
		growth.Status, growth.Detail = "SKIP", "needs two sizes"
	}
	if r.RSSMethod == RSSMethodSampled {
		abs.Detail += " (sampled VmRSS: may miss short spikes)"
	}
	return []Check{abs, growth}
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func mib(n uint64) float64 { return float64(n) / MiB }

// FormatSize renders a byte count as "4 MiB", "1 GiB" or "1536 KiB" (exact
// binary units when they divide, bytes otherwise).
func FormatSize(n int64) string {
	switch {
	case n >= GiB && n%GiB == 0:
		return fmt.Sprintf("%d GiB", n/GiB)
	case n >= MiB && n%MiB == 0:
		return fmt.Sprintf("%d MiB", n/MiB)
	case n >= KiB && n%KiB == 0:
		return fmt.Sprintf("%d KiB", n/KiB)
	}
	return fmt.Sprintf("%d B", n)
}

// redactURL keeps a store URL's scheme, host and path: its query and user
// info may carry credentials.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// ctxReader stops a long generated stream once ctx is done (Ctrl-C).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

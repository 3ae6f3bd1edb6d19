package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// BenchmarkCheckInClaim is one round trip per iteration: CheckIn of a
// generated payload, Claim, Open (verified) and reading it to the end. Each
// iteration uses fresh content, so no check-in is deduplicated. Peak RSS
// and heap cover the whole timed loop.
func BenchmarkCheckInClaim(b *testing.B) {
	for _, size := range []int64{100 * KiB, 4 * MiB, 64 * MiB} {
		b.Run(strings.ReplaceAll(FormatSize(size), " ", ""), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			store, err := claimcheck.OpenStore(ctx, "file://"+dir+"/store", &claimcheck.Options{SpoolDir: dir + "/spool"})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			m := &meter{method: detectRSSMethod(), interval: 5 * time.Millisecond}
			b.SetBytes(size)
			b.ReportAllocs()
			s, err := m.measure(func() error {
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t, err := store.CheckIn(ctx, "bench", stream(uint64(i), size), nil)
					if err != nil {
						return err
					}
					p, err := store.Claim(t)
					if err != nil {
						return err
					}
					r, err := p.Open(ctx)
					if err != nil {
						return err
					}
					if _, err := io.Copy(io.Discard, r); err != nil {
						return err
					}
					r.Close()
					p.Close()
					b.StopTimer()
					if err := store.Bucket().Delete(ctx, t.Key); err != nil {
						return err
					}
					b.StartTimer()
				}
				b.StopTimer()
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			if m.method != RSSMethodNone {
				b.ReportMetric(MiBOf(s.peakRSS), "peak-RSS-MiB")
			}
			b.ReportMetric(MiBOf(s.peakHeap), "peak-heap-MiB")
		})
	}
}

func TestRunSmall(t *testing.T) {
	dir := t.TempDir()
	sizes := []int64{8 * MiB, 1 * MiB} // unordered on purpose
	var log bytes.Buffer
	rep, err := Run(context.Background(), Config{Dir: dir, Sizes: sizes, Seed: 42, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("progress:\n%s", log.String())

	type key struct {
		size    int64
		variant string
		phase   string
	}
	const plain, enc = VariantPlain, VariantEncrypted
	want := []key{
		{8 * MiB, plain, PhaseCheckIn}, {8 * MiB, plain, PhaseOpen}, {8 * MiB, plain, PhaseStream},
		{8 * MiB, enc, PhaseCheckIn}, {8 * MiB, enc, PhaseOpen}, {8 * MiB, enc, PhaseStream},
		{1 * MiB, plain, PhaseCheckIn}, {1 * MiB, plain, PhaseOpen}, {1 * MiB, plain, PhaseStream},
		{1 * MiB, enc, PhaseCheckIn}, {1 * MiB, enc, PhaseOpen}, {1 * MiB, enc, PhaseStream},
		{1 * MiB, "", PhaseNaive},
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(rep.Results), len(want), rep.Results)
	}
	digests := map[int64]string{}
	for _, n := range sizes {
		// Independent of the package's digest helper.
		h := sha256.New()
		if _, err := io.Copy(h, stream(42, n)); err != nil {
			t.Fatal(err)
		}
		digests[n] = hex.EncodeToString(h.Sum(nil))
	}
	if digests[1*MiB] == digests[8*MiB] {
		t.Fatal("streams of different sizes share a digest")
	}
	onLinux := rep.RSSMethod != RSSMethodNone
	for i, r := range rep.Results {
		if (key{r.Size, r.Variant, r.Phase}) != want[i] {
			t.Errorf("result %d is %s %s %s, want %+v", i, FormatSize(r.Size), r.Variant, r.Phase, want[i])
		}
		if !r.Verified || r.SHA256 != digests[r.Size] {
			t.Errorf("%s %s: verified=%t sha256=%s, want the generated stream's %s", FormatSize(r.Size), r.Phase, r.Verified, r.SHA256, digests[r.Size])
		}
		if r.Deduplicated {
			t.Errorf("%s %s: deduplicated in a fresh store", FormatSize(r.Size), r.Phase)
		}
		if r.Seconds <= 0 || r.MiBPerSec <= 0 {
			t.Errorf("%s %s: seconds=%v MiB/s=%v", FormatSize(r.Size), r.Phase, r.Seconds, r.MiBPerSec)
		}
		if r.PeakHeap == 0 {
			t.Errorf("%s %s: no heap sample", FormatSize(r.Size), r.Phase)
		}
		if onLinux && (r.StartRSS == 0 || r.PeakRSS < r.StartRSS) {
			t.Errorf("%s %s: start RSS %d, peak RSS %d", FormatSize(r.Size), r.Phase, r.StartRSS, r.PeakRSS)
		}
	}
	// The baseline holds the whole payload: the heap sampler must see it.
	if naive := rep.Results[12]; naive.PeakHeap < 1*MiB {
		t.Errorf("naive ReadAll of 1 MiB: peak heap %d bytes, below the payload", naive.PeakHeap)
	}
	// Two memory checks per variant; no throughput ratio check, since the
	// largest size (8 MiB) is under MinRatioSize (timings of milliseconds).
	wantChecks := []string{
		"plain: peak RSS for 8 MiB under 64 MiB", "plain: peak RSS for 8 MiB within 16 MiB of 1 MiB",
		"encrypted: peak RSS for 8 MiB under 64 MiB", "encrypted: peak RSS for 8 MiB within 16 MiB of 1 MiB",
	}
	if len(rep.Checks) != len(wantChecks) {
		t.Fatalf("got %d checks, want %d: %+v", len(rep.Checks), len(wantChecks), rep.Checks)
	}
	for i, c := range rep.Checks {
		if c.Name != wantChecks[i] {
			t.Errorf("check %d is %q, want %q", i, c.Name, wantChecks[i])
		}
		if c.Status != "PASS" && c.Status != "FAIL" && !(c.Status == "SKIP" && !onLinux) {
			t.Errorf("check %q: status %q", c.Name, c.Status)
		}
		if i >= 4 {
			phase := []string{PhaseCheckIn, PhaseOpen, PhaseStream}[i-4]
			p, _ := rep.Result(8*MiB, plain, phase)
			e, _ := rep.Result(8*MiB, enc, phase)
			if want := e.MiBPerSec / p.MiBPerSec; c.MinRatio != MinEncryptedRatio || c.Ratio != want ||
				c.Status != map[bool]string{true: "PASS", false: "FAIL"}[want >= MinEncryptedRatio] {
				t.Errorf("check %q: ratio %v min %v status %s; want ratio %v (%v / %v MiB/s)", c.Name, c.Ratio, c.MinRatio, c.Status, want, e.MiBPerSec, p.MiBPerSec)
			}
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("Run left %d entries in its directory (err %v)", len(entries), err)
	}

	var out bytes.Buffer
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Logf("report:\n%s", text)
	for _, s := range []string{"peak RSS MiB", "peak heap MiB", "8 MiB", PhaseNaive, "peak RSS for 8 MiB under 64 MiB", "within 16 MiB of 1 MiB",
		"variant", "encrypted/plain", "peak RSS 8 MiB encrypted"} {
		if !strings.Contains(text, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if got := strings.Count(text, "\nPASS ") + strings.Count(text, "\nFAIL ") + strings.Count(text, "\nSKIP "); got != len(wantChecks) {
		t.Errorf("report has %d check lines, want %d", got, len(wantChecks))
	}

	js, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, rep) {
		t.Errorf("JSON round trip differs:\n%s", js)
	}
	for _, field := range []string{`"peak_rss_bytes"`, `"peak_heap_bytes"`, `"mib_per_s"`, `"status"`, `"rss_method"`, `"variant": "encrypted"`} {
		if !bytes.Contains(js, []byte(field)) {
			t.Errorf("JSON lacks %s", field)
		}
	}
}

func TestRunRejectsBadSize(t *testing.T) {
	if _, err := Run(context.Background(), Config{Dir: t.TempDir(), Sizes: []int64{0}}); err == nil {
		t.Fatal("size 0 accepted")
	}
}

func TestRunRejectsBadVariant(t *testing.T) {
	for _, v := range [][]string{{"gzip"}, {VariantPlain, VariantPlain}} {
		if _, err := Run(context.Background(), Config{Dir: t.TempDir(), Sizes: []int64{MiB}, Variants: v}); err == nil {
			t.Errorf("variants %q accepted", v)
		}
	}
}

// TestRunOneVariant keeps the single-variant form: only its results, its
// two memory checks, and no throughput comparison.
func TestRunOneVariant(t *testing.T) {
	dir := t.TempDir()
	rep, err := Run(context.Background(), Config{Dir: dir, Sizes: []int64{MiB}, Variants: []string{VariantEncrypted}, NoBaseline: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 {
		t.Fatalf("got %d results, want 3", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Variant != VariantEncrypted || !r.Verified {
			t.Errorf("%s %s: variant %q verified=%v", FormatSize(r.Size), r.Phase, r.Variant, r.Verified)
		}
	}
	if len(rep.Checks) != 2 || !strings.HasPrefix(rep.Checks[0].Name, "encrypted: ") {
		t.Fatalf("checks = %+v", rep.Checks)
	}
	var out bytes.Buffer
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "encrypted/plain") {
		t.Errorf("a one-variant report prints a comparison:\n%s", out.String())
	}
}

// TestRunEncryptedUsesKeeper proves the encrypted variant goes through its
// keeper: with the keeper closed, nothing can be checked in.
func TestRunEncryptedUsesKeeper(t *testing.T) {
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	k := localsecrets.NewKeeper(key)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Config{Dir: t.TempDir(), Sizes: []int64{MiB}, Keeper: k})
	if err == nil || !strings.Contains(err.Error(), "keeper") {
		t.Fatalf("Run with a closed keeper: %v", err)
	}
}

func TestStreamDeterministic(t *testing.T) {
	a, _ := io.ReadAll(stream(7, 100_000))
	b, _ := io.ReadAll(stream(7, 100_000))
	c, _ := io.ReadAll(stream(8, 100_000))
	if len(a) != 100_000 || !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Fatalf("stream: len %d, same seed equal %t, other seed equal %t", len(a), bytes.Equal(a, b), bytes.Equal(a, c))
	}
}

// TestRunFull runs the real measurement (default sizes, 4 MiB and 1 GiB;
// both variants) when CLAIMCHECK_BENCH_FULL=1; CLAIMCHECK_BENCH_DIR picks
// the disk, CLAIMCHECK_BENCH_SIZES (comma-separated bytes) overrides the
// sizes, CLAIMCHECK_BENCH_ROUNDS sets Config.Rounds and
// CLAIMCHECK_BENCH_NOBASELINE=1 skips the baseline. It prints the report and
// fails if a check fails.
func TestRunFull(t *testing.T) {
	if os.Getenv("CLAIMCHECK_BENCH_FULL") != "1" {
		t.Skip("set CLAIMCHECK_BENCH_FULL=1 to run (needs ~3 GiB of disk)")
	}
	cfg := Config{Dir: os.Getenv("CLAIMCHECK_BENCH_DIR"), Log: os.Stderr, NoBaseline: os.Getenv("CLAIMCHECK_BENCH_NOBASELINE") == "1"}
	if s := os.Getenv("CLAIMCHECK_BENCH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Rounds = n
	}
	if s := os.Getenv("CLAIMCHECK_BENCH_SIZES"); s != "" {
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Sizes = append(cfg.Sizes, n)
		}
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Write(os.Stdout); err != nil {
		t.Fatal(err)
	}
	if js, err := rep.JSON(); err == nil {
		t.Logf("json:\n%s", js)
	}
	if !rep.Passed() {
		t.Error("a check failed")
	}
}

// TestRunRounds measures every phase once per round, alternating the
// variants, and reports each phase's fastest round.
func TestRunRounds(t *testing.T) {
	var log bytes.Buffer
	rep, err := Run(context.Background(), Config{Dir: t.TempDir(), Sizes: []int64{MiB}, Rounds: 2, NoBaseline: true, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rounds != 2 || len(rep.Results) != 6 {
		t.Fatalf("rounds %d, %d results; want 2 rounds, 6 results", rep.Rounds, len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Rounds != 2 || !r.Verified || r.Deduplicated {
			t.Errorf("%s %s: rounds %d verified %v dedup %v", r.Variant, r.Phase, r.Rounds, r.Verified, r.Deduplicated)
		}
	}
	// Every round logs its own line: plain first in round 1, encrypted first in round 2.
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 12 {
		t.Fatalf("log has %d lines, want 12:\n%s", len(lines), log.String())
	}
	for i, want := range []string{"plain", "plain", "plain", "encrypted", "encrypted", "encrypted", "encrypted", "encrypted", "encrypted", "plain", "plain", "plain"} {
		if !strings.Contains(lines[i], " "+want+" ") {
			t.Errorf("log line %d is %q, want the %s variant", i, lines[i], want)
		}
	}
}

func TestFastest(t *testing.T) {
	rounds := [][]Result{
		{{Phase: PhaseCheckIn, Seconds: 2, MiBPerSec: 1, StartRSS: 5, PeakRSS: 10, PeakHeap: 3, Verified: true},
			{Phase: PhaseOpen, Seconds: 1, MiBPerSec: 2, StartRSS: 5, PeakRSS: 30, PeakHeap: 1, Verified: true}},
		{{Phase: PhaseCheckIn, Seconds: 1, MiBPerSec: 2, StartRSS: 6, PeakRSS: 20, PeakHeap: 2, Verified: true},
			{Phase: PhaseOpen, Seconds: 4, MiBPerSec: 0.5, StartRSS: 6, PeakRSS: 10, PeakHeap: 2, Verified: false}},
	}
	got := fastest(rounds)
	want := []Result{
		{Phase: PhaseCheckIn, Seconds: 1, MiBPerSec: 2, StartRSS: 6, PeakRSS: 20, PeakHeap: 3, Verified: true, Rounds: 2},
		{Phase: PhaseOpen, Seconds: 1, MiBPerSec: 2, StartRSS: 5, PeakRSS: 30, PeakHeap: 2, Verified: false, Rounds: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fastest =\n%+v\nwant\n%+v", got, want)
	}
}

// TestRatioChecks: from MinRatioSize up, one check per phase compares the
// encrypted throughput with the plain one against MinEncryptedRatio.
func TestRatioChecks(t *testing.T) {
	t.Parallel()
	r := &Report{}
	speeds := map[string]float64{PhaseCheckIn: 0.99, PhaseOpen: 0.74, PhaseStream: 0.80}
	for phase, ratio := range speeds {
		r.Results = append(r.Results,
			Result{Size: GiB, Variant: VariantPlain, Phase: phase, MiBPerSec: 100},
			Result{Size: GiB, Variant: VariantEncrypted, Phase: phase, MiBPerSec: 100 * ratio})
	}
	checks := r.check([]int64{GiB}, []string{VariantPlain, VariantEncrypted})
	want := map[string]string{
		"encrypted checkin throughput for 1 GiB at least 75% of plain": "PASS",
		"encrypted open throughput for 1 GiB at least 75% of plain":    "FAIL",
		"encrypted stream throughput for 1 GiB at least 75% of plain":  "PASS",
	}
	found := 0
	for _, c := range checks {
		if st, ok := want[c.Name]; ok {
			found++
			if c.Status != st || c.MinRatio != MinEncryptedRatio {
				t.Errorf("%s: %s (ratio %v, min %v), want %s", c.Name, c.Status, c.Ratio, c.MinRatio, st)
			}
		}
	}
	if found != 3 {
		t.Errorf("%d ratio checks at 1 GiB, want 3: %+v", found, checks)
	}
	if small := r.check([]int64{8 * MiB}, []string{VariantPlain, VariantEncrypted}); len(small) != 4 {
		t.Errorf("at 8 MiB: %d checks, want the 4 memory checks only", len(small))
	}
}

package benchlab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"github.com/claimcheck/claimcheck/internal/bench"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestCompareAlternatesAndRatios runs a comparison whose cases report
// fixed figures (so the ratios are exact) and do real work (hashing), and
// checks the order of the runs (reversed in odd rounds, each between its
// Prepare and Cleanup), the ratios per round against the limiting
// reference, the goals, and the printed and JSON reports.
func TestCompareAlternatesAndRatios(t *testing.T) {
	var calls []string
	perRound := map[string][]float64{ // MiB moved per round, in 1 s
		"subject": {2, 3, 1},
		"fast":    {4, 4, 4},
		"slow":    {1, 2, 2},
	}
	latency := map[string][]float64{"subject": {12, 12, 30}, "fast": {10, 10, 10}}
	round := map[string]int{}
	mk := func(name string) Case {
		return Case{
			Name:    name,
			Prepare: func(context.Context) error { calls = append(calls, "prepare "+name); return nil },
			Run: func(ctx context.Context) (Sample, error) {
				calls = append(calls, "run "+name)
				h := sha256.New()
				if _, err := io.Copy(h, bench.Stream(1, 256*bench.KiB)); err != nil {
					return Sample{}, err
				}
				i := round[name]
				round[name]++
				s := Sample{Seconds: 1, Bytes: int64(perRound[name][i] * bench.MiB)}
				if l, ok := latency[name]; ok {
					s.Values = map[string]float64{"p50 ms": l[i]}
				}
				return s, nil
			},
			Cleanup: func(context.Context) error { calls = append(calls, "cleanup "+name); return nil },
		}
	}
	var setups, teardowns int
	var log bytes.Buffer
	rep, err := Compare(t.Context(), Comparison{
		Title:  "test",
		Rounds: 3,
		Log:    &log,
		Groups: []Group{{
			Name:     "group one",
			Cases:    []Case{mk("subject"), mk("fast"), mk("slow")},
			Setup:    func(context.Context) error { setups++; return nil },
			Teardown: func(context.Context) { teardowns++ },
			Ratios: []RatioSpec{
				{Name: "subject/min(fast,slow)", Subject: "subject", References: []string{"fast", "slow"}, Metric: MetricMiBPerSec, Goal: 1.2},
				{Name: "subject/fast", Subject: "subject", References: []string{"fast"}, Metric: MetricMiBPerSec, Goal: 0.9},
				{Name: "p50 subject/fast", Subject: "subject", References: []string{"fast"}, Metric: MetricValue("p50 ms", true), Goal: 1.3},
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, order := range [][]string{{"subject", "fast", "slow"}, {"slow", "fast", "subject"}, {"subject", "fast", "slow"}} {
		for _, n := range order {
			want = append(want, "prepare "+n, "run "+n, "cleanup "+n)
		}
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	if setups != 1 || teardowns != 1 {
		t.Fatalf("setup ran %d times, teardown %d; want once each", setups, teardowns)
	}

	check := func(name string, per []float64, median, lo, hi float64, status string) {
		t.Helper()
		q, ok := rep.Ratio("group one", name)
		if !ok {
			t.Fatalf("no ratio %q", name)
		}
		if !slices.Equal(q.PerRound, per) || q.Median != median || q.Min != lo || q.Max != hi || q.Status != status {
			t.Fatalf("%s: per round %v median %v min %v max %v status %q; want %v %v %v %v %q", name, q.PerRound, q.Median, q.Min, q.Max, q.Status, per, median, lo, hi, status)
		}
	}
	// Against the slower reference of each round: 2/1, 3/2, 1/2.
	check("subject/min(fast,slow)", []float64{2, 1.5, 0.5}, 1.5, 0.5, 2, "PASS")
	check("subject/fast", []float64{0.5, 0.75, 0.25}, 0.5, 0.25, 0.75, "FAIL")
	check("p50 subject/fast", []float64{1.2, 1.2, 3}, 1.2, 1.2, 3, "PASS")
	if rep.Passed() {
		t.Fatal("Passed with a failed goal")
	}
	if g := rep.Groups[0]; len(g.Load) != 3 || len(g.Cases) != 3 || len(g.Cases[0].Samples) != 3 {
		t.Fatalf("group: %d loads, %d cases", len(g.Load), len(g.Cases))
	}
	for _, cs := range rep.Groups[0].Cases {
		for _, s := range cs.Samples {
			if s.CPUSeconds < 0 || s.Seconds != 1 {
				t.Fatalf("%s: %+v", cs.Name, s)
			}
		}
	}
	if _, ok := ReadLoadAvg(); ok && rep.LoadEnd == (LoadAvg{}) {
		t.Fatal("load average readable but not recorded")
	}

	var out bytes.Buffer
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"== group one ==", "1-min load as each round started", "subject/min(fast,slow)", "1.50", "0.50–2.00", "≥ 1.20", "≤ 1.30", "FAIL", "p50 ms"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
	b, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back CompareReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Groups) != 1 || len(back.Groups[0].Ratios) != 3 || back.Groups[0].Ratios[0].Median != 1.5 {
		t.Fatalf("JSON round trip: %s", b)
	}
	if n := strings.Count(log.String(), "\n"); n != 9 {
		t.Fatalf("%d log lines, want one per run (9):\n%s", n, log.String())
	}
}

// TestCompareRefusesUnknownCase: a ratio must name cases of its group.
func TestCompareRefusesUnknownCase(t *testing.T) {
	run := func(context.Context) (Sample, error) { return Sample{Bytes: 1}, nil }
	_, err := Compare(t.Context(), Comparison{Groups: []Group{{
		Name:   "g",
		Cases:  []Case{{Name: "a", Run: run}},
		Ratios: []RatioSpec{{Name: "a/b", Subject: "a", References: []string{"b"}, Metric: MetricMiBPerSec}},
	}}})
	if err == nil || !strings.Contains(err.Error(), `names case "b"`) {
		t.Fatalf("err = %v, want the unknown case named", err)
	}
}

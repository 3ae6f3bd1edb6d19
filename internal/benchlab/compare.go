package benchlab

// The comparison framework: claimcheck measured against plain references
// (SHA-256 and the disk, the AWS SDK alone, River alone) in one process and
// one run, so that every ratio is taken between figures of the same
// machine state. A Comparison is a list of Groups (one per store and size,
// or per database); each Group's Cases run once per round, their order
// alternated from round to round (reversed in odd rounds) so that neither
// side always runs first on a warm or a cold machine; each Ratio is taken
// per round (subject over reference of the same round) and reported with
// its median, min and max, next to the load average read from
// /proc/loadavg as each round started. On a machine shared with other
// work, one run's ratios are what count, never figures of separate runs.

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/claimcheck/claimcheck/internal/bench"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// compareInterval is how often Compare samples the Go heap; RssAnon and
// RssFile are read every statusEvery samples (compareInterval ×
// statusEvery, 50 ms).
const compareInterval = 5 * time.Millisecond

// Sample is what one run of a Case measured. The framework sets Seconds
// (wall clock of Case.Run, unless Run set it), CPUSeconds (this process's
// user and system CPU time during Run; 0 where getrusage is unavailable),
// StartRSS and PeakRSS (bytes, the method of Report.RSSMethod), and
// PeakAnon and PeakFile; Run sets the rest.
type Sample struct {
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	StartRSS   uint64  `json:"start_rss_bytes,omitempty"`
	PeakRSS    uint64  `json:"peak_rss_bytes,omitempty"`
	// PeakAnon and PeakFile (bytes) are the highest RssAnon and RssFile
	// of /proc/self/status sampled every 50 ms during Run: the resident
	// set's anonymous part (heap, stacks, buffers: what the process holds
	// for the work) and its file-backed part (mostly the executable's
	// own text and read-only data, which the kernel maps in as code runs
	// and can drop under memory pressure). Sampled, so each is at most
	// PeakRSS and the two need not add up to it. 0 where unavailable.
	PeakAnon uint64 `json:"peak_anon_bytes,omitempty"`
	PeakFile uint64 `json:"peak_file_bytes,omitempty"`
	// Bytes is the payload bytes moved (for MetricMiBPerSec).
	Bytes int64 `json:"bytes,omitempty"`
	// Ops is the operations (jobs, entries) done (for MetricOpsPerSec and
	// MetricCPUPerOp).
	Ops int64 `json:"ops,omitempty"`
	// Values are the case's own figures by name (for MetricValue), such
	// as a latency percentile in milliseconds.
	Values map[string]float64 `json:"values,omitempty"`
}

// Case is one measured operation, run once per round.
type Case struct {
	// Name identifies the case in its group's ratios and in the report.
	Name string
	// Prepare, if set, runs before each Run and is not measured.
	Prepare func(ctx context.Context) error
	// Run is measured: wall clock, CPU time and peak RSS.
	Run func(ctx context.Context) (Sample, error)
	// Cleanup, if set, runs after each Run, even a failed one, and is not
	// measured.
	Cleanup func(ctx context.Context) error
}

// Metric is a figure derived from a Sample, such as MiB/s.
type Metric struct {
	// Name is the metric's unit or name, as printed ("MiB/s").
	Name string
	// LowerIsBetter marks metrics such as latency or CPU per operation.
	LowerIsBetter bool
	// Of computes the figure; NaN or ±Inf means not measured.
	Of func(Sample) float64
}

// The common metrics.
var (
	// MetricMiBPerSec is Bytes over Seconds, in MiB/s.
	MetricMiBPerSec = Metric{Name: "MiB/s", Of: func(s Sample) float64 { return float64(s.Bytes) / bench.MiB / s.Seconds }}
	// MetricOpsPerSec is Ops over Seconds.
	MetricOpsPerSec = Metric{Name: "ops/s", Of: func(s Sample) float64 { return float64(s.Ops) / s.Seconds }}
	// MetricCPUPerOp is CPUSeconds over Ops, in milliseconds of CPU.
	MetricCPUPerOp = Metric{Name: "CPU ms/op", LowerIsBetter: true, Of: func(s Sample) float64 { return s.CPUSeconds * 1000 / float64(s.Ops) }}
)

// MetricValue is the metric of Sample.Values[name] (NaN when absent).
func MetricValue(name string, lowerIsBetter bool) Metric {
	return Metric{Name: name, LowerIsBetter: lowerIsBetter, Of: func(s Sample) float64 {
		v, ok := s.Values[name]
		if !ok {
			return math.NaN()
		}
		return v
	}}
}

// RatioSpec is a ratio a Group reports: Subject's metric over the
// References' in the same round. With several references the ratio is
// taken against the limiting one, the slowest: the lowest figure of a
// higher-is-better metric (check-in against min(SHA-256, disk)), the
// highest of a lower-is-better one.
type RatioSpec struct {
	Name       string
	Subject    string
	References []string
	Metric     Metric
	// Goal, if non-zero, is the ratio's target: at least Goal for a
	// higher-is-better metric, at most Goal for a lower-is-better one,
	// judged on the median over the rounds (Status PASS or FAIL).
	Goal float64
}

// Group is a set of Cases compared with one another, with its ratios.
type Group struct {
	Name   string
	Cases  []Case
	Ratios []RatioSpec
	// Setup, if set, runs once before the group's first round (for
	// example, writing the file the cases read); Teardown after its last,
	// also after a failure. Neither is measured.
	Setup    func(ctx context.Context) error
	Teardown func(ctx context.Context)
}

// Comparison is what Compare runs.
type Comparison struct {
	// Title heads the report.
	Title string
	// Rounds is how many times each group's cases run (default 3).
	Rounds int
	Groups []Group
	// Log, if set, receives a line per measured run.
	Log io.Writer
}

// LoadAvg is bench.LoadAvg: the load average printed beside each round.
type LoadAvg = bench.LoadAvg

// ReadLoadAvg is bench.ReadLoadAvg.
func ReadLoadAvg() (LoadAvg, bool) { return bench.ReadLoadAvg() }

// CompareReport is the outcome of Compare. Its fields marshal as the
// --json form.
type CompareReport struct {
	Title     string  `json:"title"`
	Rounds    int     `json:"rounds"`
	GoVersion string  `json:"go_version"`
	NumCPU    int     `json:"num_cpu"`
	RSSMethod string  `json:"rss_method"`
	LoadStart LoadAvg `json:"load_start"`
	LoadEnd   LoadAvg `json:"load_end"`
	// Notes are lines a comparison adds under the title (what it ran
	// against, under which names).
	Notes  []string      `json:"notes,omitempty"`
	Groups []GroupResult `json:"groups"`
	// Checks are pass/fail figures a comparison adds (such as peak RSS
	// under a limit), printed after the groups.
	Checks []bench.Check `json:"checks,omitempty"`
}

// GroupResult is one group's samples and ratios.
type GroupResult struct {
	Name string `json:"name"`
	// Load is the load average as each round started.
	Load   []LoadAvg     `json:"load"`
	Cases  []CaseResult  `json:"cases"`
	Ratios []RatioResult `json:"ratios"`
}

// CaseResult is one case's samples, one per round.
type CaseResult struct {
	Name    string   `json:"name"`
	Samples []Sample `json:"samples"`
}

// RatioResult is one ratio over the rounds.
type RatioResult struct {
	Name          string    `json:"name"`
	Subject       string    `json:"subject"`
	References    []string  `json:"references"`
	Metric        string    `json:"metric"`
	LowerIsBetter bool      `json:"lower_is_better,omitempty"`
	PerRound      []float64 `json:"per_round"`
	Median        float64   `json:"median"`
	Min           float64   `json:"min"`
	Max           float64   `json:"max"`
	Goal          float64   `json:"goal,omitempty"`
	// Status is "PASS" or "FAIL" against Goal (the median), "" without one.
	Status string `json:"status,omitempty"`
}

// Passed reports whether no ratio with a goal failed.
func (r *CompareReport) Passed() bool {
	for _, c := range r.Checks {
		if c.Status == "FAIL" {
			return false
		}
	}
	for _, g := range r.Groups {
		for _, q := range g.Ratios {
			if q.Status == "FAIL" {
				return false
			}
		}
	}
	return true
}

// Ratio returns a group's ratio by name.
func (r *CompareReport) Ratio(group, name string) (RatioResult, bool) {
	for _, g := range r.Groups {
		if g.Name != group {
			continue
		}
		for _, q := range g.Ratios {
			if q.Name == name {
				return q, true
			}
		}
	}
	return RatioResult{}, false
}

// Compare runs every group in turn, each for c.Rounds rounds with its cases'
// order reversed in odd rounds, and computes each ratio per round. It
// shares Run's lock (bench.Lock): measurements are process-wide. A failing case, setup
// or ratio naming an unknown case ends the run with its error.
func Compare(ctx context.Context, c Comparison) (*CompareReport, error) {
	defer bench.Lock()()
	rounds := c.Rounds
	if rounds <= 0 {
		rounds = 3
	}
	for _, g := range c.Groups {
		if err := g.validate(); err != nil {
			return nil, err
		}
	}
	m := bench.NewMeter(compareInterval)
	rep := &CompareReport{Title: c.Title, Rounds: rounds, GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(), RSSMethod: m.Method()}
	rep.LoadStart, _ = ReadLoadAvg()
	for _, g := range c.Groups {
		gr, err := runGroup(ctx, g, rounds, m, c.Log)
		if err != nil {
			return nil, err
		}
		rep.Groups = append(rep.Groups, gr)
	}
	rep.LoadEnd, _ = ReadLoadAvg()
	return rep, nil
}

func (g *Group) validate() error {
	names := map[string]bool{}
	for _, cs := range g.Cases {
		if cs.Name == "" || cs.Run == nil || names[cs.Name] {
			return fmt.Errorf("bench: compare %s: case %q: each case needs a unique name and a Run", g.Name, cs.Name)
		}
		names[cs.Name] = true
	}
	for _, q := range g.Ratios {
		if q.Metric.Of == nil || len(q.References) == 0 {
			return fmt.Errorf("bench: compare %s: ratio %q needs a metric and a reference", g.Name, q.Name)
		}
		for _, n := range append([]string{q.Subject}, q.References...) {
			if !names[n] {
				return fmt.Errorf("bench: compare %s: ratio %q names case %q, which the group does not have", g.Name, q.Name, n)
			}
		}
	}
	return nil
}

func runGroup(ctx context.Context, g Group, rounds int, m *bench.Meter, log io.Writer) (gr GroupResult, err error) {
	gr.Name = g.Name
	if g.Teardown != nil {
		defer g.Teardown(context.WithoutCancel(ctx))
	}
	if g.Setup != nil {
		if err := g.Setup(ctx); err != nil {
			return gr, fmt.Errorf("bench: compare %s: setup: %w", g.Name, err)
		}
	}
	samples := make(map[string][]Sample, len(g.Cases))
	for round := range rounds {
		load, _ := ReadLoadAvg()
		gr.Load = append(gr.Load, load)
		order := slices.Clone(g.Cases)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, cs := range order {
			s, err := runCase(ctx, cs, m)
			if err != nil {
				return gr, fmt.Errorf("bench: compare %s: %s (round %d): %w", g.Name, cs.Name, round+1, err)
			}
			samples[cs.Name] = append(samples[cs.Name], s)
			if log != nil {
				fmt.Fprintf(log, "compare: %s, round %d: %-34s %8.3fs  CPU %7.3fs  peak RSS %6.1f MiB  load %s\n",
					g.Name, round+1, cs.Name, s.Seconds, s.CPUSeconds, bench.MiBOf(s.PeakRSS), load)
			}
		}
	}
	for _, cs := range g.Cases {
		gr.Cases = append(gr.Cases, CaseResult{Name: cs.Name, Samples: samples[cs.Name]})
	}
	for _, q := range g.Ratios {
		gr.Ratios = append(gr.Ratios, ratioOf(q, samples, rounds))
	}
	return gr, nil
}

// runCase prepares, measures and cleans up one run of a case.
func runCase(ctx context.Context, cs Case, m *bench.Meter) (Sample, error) {
	if cs.Prepare != nil {
		if err := cs.Prepare(ctx); err != nil {
			return Sample{}, fmt.Errorf("prepare: %w", err)
		}
	}
	var got Sample
	var cpu0, cpu1 float64
	ms, err := m.Measure(func() error {
		cpu0 = bench.CPUSeconds()
		var err error
		got, err = cs.Run(ctx)
		cpu1 = bench.CPUSeconds()
		return err
	})
	if cs.Cleanup != nil {
		if cerr := cs.Cleanup(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = fmt.Errorf("cleanup: %w", cerr)
		}
	}
	if err != nil {
		return Sample{}, err
	}
	if got.Seconds <= 0 {
		got.Seconds = ms.Elapsed.Seconds()
	}
	got.CPUSeconds = cpu1 - cpu0
	got.StartRSS, got.PeakRSS, got.PeakAnon, got.PeakFile = ms.StartRSS, ms.PeakRSS, ms.PeakAnon, ms.PeakFile
	return got, nil
}

// ratioOf computes one ratio per round and its summary.
func ratioOf(q RatioSpec, samples map[string][]Sample, rounds int) RatioResult {
	r := RatioResult{Name: q.Name, Subject: q.Subject, References: q.References, Metric: q.Metric.Name,
		LowerIsBetter: q.Metric.LowerIsBetter, Goal: q.Goal}
	for i := range rounds {
		subj := q.Metric.Of(samples[q.Subject][i])
		ref := math.NaN()
		for _, n := range q.References {
			v := q.Metric.Of(samples[n][i])
			switch {
			case math.IsNaN(ref):
				ref = v
			case q.Metric.LowerIsBetter:
				ref = max(ref, v)
			default:
				ref = min(ref, v)
			}
		}
		v := subj / ref
		if math.IsNaN(v) || math.IsInf(v, 0) {
			v = 0 // not measured (JSON has no NaN)
		}
		r.PerRound = append(r.PerRound, v)
	}
	r.Median, r.Min, r.Max = summarize(r.PerRound)
	if q.Goal != 0 {
		ok := r.Median >= q.Goal
		if q.Metric.LowerIsBetter {
			ok = r.Median <= q.Goal
		}
		r.Status = bench.PassFail(ok && r.Min > 0)
	}
	return r
}

// startCPUProfile starts a CPU profile (runtime/pprof) into the file at
// path and returns what stops it and closes the file. A profile that
// cannot be started (the file cannot be created, another profile runs) is
// skipped: the measurement goes on without it.
func startCPUProfile(path string) func() {
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// summarize is the median, min and max of xs (NaN when empty).
func summarize(xs []float64) (median, lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	median = s[len(s)/2]
	if len(s)%2 == 0 {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return median, s[0], s[len(s)-1]
}

// Write prints the report: the load average at the start and end, then per
// group the load as each round started, every case's figures per round
// (seconds, CPU seconds, peak RSS, and each metric its ratios use), and the
// ratios with median, min–max, goal and status.
func (r *CompareReport) Write(w io.Writer) error {
	ew := &bench.ErrWriter{W: w}
	fmt.Fprintf(ew, "%s: %s, %d CPUs, %d rounds per group, order of the cases reversed in odd rounds\n", r.Title, r.GoVersion, r.NumCPU, r.Rounds)
	fmt.Fprintf(ew, "load average (1/5/15 min, /proc/loadavg): %s at the start, %s at the end; peak RSS: %s\n", r.LoadStart, r.LoadEnd, r.RSSMethod)
	for _, n := range r.Notes {
		fmt.Fprintln(ew, n)
	}
	for _, g := range r.Groups {
		fmt.Fprintf(ew, "\n== %s ==\n", g.Name)
		loads := make([]string, len(g.Load))
		for i, l := range g.Load {
			loads[i] = fmt.Sprintf("%.2f", l.One)
		}
		fmt.Fprintf(ew, "1-min load as each round started: %s\n", strings.Join(loads, ", "))
		metrics := groupMetrics(g)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		hdr := "case\tround\tseconds\tCPU s\tpeak RSS MiB\tanon MiB\tfile MiB"
		for _, mt := range metrics {
			hdr += "\t" + mt.Name
		}
		fmt.Fprintln(tw, hdr+"\t")
		for _, cs := range g.Cases {
			for i, s := range cs.Samples {
				line := fmt.Sprintf("%s\t%d\t%.3f\t%.3f\t%.1f\t%.1f\t%.1f", cs.Name, i+1, s.Seconds, s.CPUSeconds, bench.MiBOf(s.PeakRSS), bench.MiBOf(s.PeakAnon), bench.MiBOf(s.PeakFile))
				for _, mt := range metrics {
					line += "\t" + formatFigure(mt.Of(s))
				}
				fmt.Fprintln(tw, line+"\t")
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(ew)
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ratio\tmetric\tmedian\tmin–max\tper round\tgoal\tstatus\t")
		for _, q := range g.Ratios {
			per := make([]string, len(q.PerRound))
			for i, v := range q.PerRound {
				per[i] = fmt.Sprintf("%.2f", v)
			}
			goal, status := "-", q.Status
			if q.Goal != 0 {
				op := "≥"
				if q.LowerIsBetter {
					op = "≤"
				}
				goal = fmt.Sprintf("%s %.2f", op, q.Goal)
			}
			if status == "" {
				status = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f–%.2f\t%s\t%s\t%s\t\n", q.Name, q.Metric, q.Median, q.Min, q.Max, strings.Join(per, " "), goal, status)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Checks) > 0 {
		fmt.Fprintln(ew)
	}
	for _, c := range r.Checks {
		fmt.Fprintf(ew, "%s  %s: %.1f MiB (limit %.1f MiB; %s)\n", c.Status, c.Name, c.ValueMiB, c.LimitMiB, c.Detail)
	}
	return ew.Err
}

// JSON is the report's --json form, indented.
func (r *CompareReport) JSON() ([]byte, error) {
	return json.MarshalIndent(r, "", "  ")
}

// groupMetrics are the distinct metrics a group's ratios use, by name, in
// the order they first appear.
func groupMetrics(g GroupResult) []Metric {
	var out []Metric
	for _, q := range g.Ratios {
		if !slices.ContainsFunc(out, func(m Metric) bool { return m.Name == q.Metric }) {
			if mt, ok := knownMetric(q.Metric, q.LowerIsBetter); ok {
				out = append(out, mt)
			}
		}
	}
	return out
}

// knownMetric finds a metric by its name for printing: the common ones, or
// a Sample.Values entry of that name.
func knownMetric(name string, lower bool) (Metric, bool) {
	for _, m := range []Metric{MetricMiBPerSec, MetricOpsPerSec, MetricCPUPerOp} {
		if m.Name == name {
			return m, true
		}
	}
	return MetricValue(name, lower), true
}

func formatFigure(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/claimcheck/claimcheck/pipeline"
)

// JobsConfig configures Jobs.
type JobsConfig struct {
	// Pipeline is the deployment measured: its job database and store.
	// Required. The jobs Jobs enqueues are deleted afterwards.
	Pipeline *pipeline.Pipeline
	// Database and Store name the job database and the store in the
	// report (redacted: scheme, host and path).
	Database, Store string
	// Jobs per enqueue and work phase (default DefaultJobs); LatencyJobs
	// per latency phase (default DefaultLatencyJobs).
	Jobs, LatencyJobs int
	// Size is each payload in bytes (default DefaultJobSize); Workers the
	// jobs worked at once (default DefaultJobWorkers).
	Size    int64
	Workers int
	// Log, if set, receives a line per phase.
	Log io.Writer
}

// JobsPhase is one measured phase of Jobs; times in seconds, sizes in
// bytes.
type JobsPhase struct {
	Name       string  `json:"name"`
	Jobs       int     `json:"jobs"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	PeakRSS    uint64  `json:"peak_rss_bytes"`
	PeakAnon   uint64  `json:"peak_anon_bytes"`
	PeakHeap   uint64  `json:"peak_heap_bytes"`
}

// MsPerJob is the phase's wall time per job in milliseconds.
func (p JobsPhase) MsPerJob() float64 { return p.Seconds * 1000 / float64(p.Jobs) }

// JobsPerSec is the phase's jobs per second.
func (p JobsPhase) JobsPerSec() float64 { return float64(p.Jobs) / p.Seconds }

// CPUMsPerJob is this process's CPU time per job in milliseconds.
func (p JobsPhase) CPUMsPerJob() float64 { return p.CPUSeconds * 1000 / float64(p.Jobs) }

// Phases of Jobs.
const (
	JobsPhaseEnqueue = "enqueue"
	JobsPhaseWork    = "work"
	JobsPhaseLatency = "latency"
)

// JobsReport is the outcome of Jobs. Its fields marshal as the --json
// form.
type JobsReport struct {
	Database  string  `json:"database"`
	Store     string  `json:"store"`
	Size      int64   `json:"size_bytes"`
	Workers   int     `json:"workers"`
	Sealed    bool    `json:"sealed"`
	Inline    bool    `json:"inline"`
	GoVersion string  `json:"go_version"`
	NumCPU    int     `json:"num_cpu"`
	RSSMethod string  `json:"rss_method"`
	LoadStart LoadAvg `json:"load_start"`
	LoadEnd   LoadAvg `json:"load_end"`
	// Phases are enqueue, work and latency, in that order.
	Phases []JobsPhase `json:"phases"`
	// EnqueueToHandler and HandlerToDone are the latency phase's, in ms.
	EnqueueToHandler Latency `json:"enqueue_to_handler_ms"`
	HandlerToDone    Latency `json:"handler_to_done_ms"`
}

// Jobs measures small jobs through cfg.Pipeline (JobRig), one phase after
// the other, each timed and its peak memory sampled (Meter):
//
//   - enqueue: cfg.Jobs enqueues one at a time;
//   - work: those cfg.Jobs waiting jobs worked by cfg.Workers at once,
//     from the workers' start until the last handler began;
//   - latency: cfg.LatencyJobs jobs enqueued one at a time, each once the
//     previous one reached its handler (enqueue → handler, and handler →
//     the attempt's outcome).
//
// The jobs are deleted afterwards (and a killed run's of JobsKind
// before). Measurements are process-wide (Lock).
// Errors: the pipeline's, and a phase past its deadline.
func Jobs(ctx context.Context, cfg JobsConfig) (rep *JobsReport, err error) {
	defer Lock()()
	if cfg.Jobs <= 0 {
		cfg.Jobs = DefaultJobs
	}
	if cfg.LatencyJobs <= 0 {
		cfg.LatencyJobs = DefaultLatencyJobs
	}
	if _, err := DeleteKind(ctx, cfg.Pipeline, JobsKind); err != nil { // a killed run's
		return nil, err
	}
	r := NewJobRig(cfg.Pipeline, cfg.Size, cfg.Workers)
	defer func() {
		if cerr := r.Cleanup(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = cerr
		}
	}()
	st := cfg.Pipeline.Store()
	m := NewMeter(5 * time.Millisecond)
	rep = &JobsReport{Database: RedactURL(cfg.Database), Store: RedactURL(cfg.Store), Size: r.size, Workers: r.workers,
		Sealed: st.Seals(), Inline: r.size <= st.InlineThreshold(), GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(), RSSMethod: m.Method()}
	rep.LoadStart, _ = ReadLoadAvg()
	phase := func(name string, jobs int, fn func() error) error {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "bench jobs: %s, %d jobs...\n", name, jobs)
		}
		cpu0 := CPUSeconds()
		u, err := m.Measure(fn)
		if err != nil {
			return fmt.Errorf("bench jobs: %s: %w", name, err)
		}
		rep.Phases = append(rep.Phases, JobsPhase{Name: name, Jobs: jobs, Seconds: u.Elapsed.Seconds(), CPUSeconds: CPUSeconds() - cpu0,
			PeakRSS: u.PeakRSS, PeakAnon: u.PeakAnon, PeakHeap: u.PeakHeap})
		return nil
	}
	// Warm-up: connections opened, code paged in.
	if err := r.Enqueue(ctx, 2); err != nil {
		return nil, fmt.Errorf("bench jobs: warm-up: %w", err)
	}
	if err := r.Work(ctx, 2); err != nil {
		return nil, fmt.Errorf("bench jobs: warm-up: %w", err)
	}
	n := int64(cfg.Jobs)
	if err := phase(JobsPhaseEnqueue, cfg.Jobs, func() error { return r.Enqueue(ctx, n) }); err != nil {
		return nil, err
	}
	if err := phase(JobsPhaseWork, cfg.Jobs, func() error { return r.Work(ctx, n) }); err != nil {
		return nil, err
	}
	var toHandler, toDone []float64
	if err := phase(JobsPhaseLatency, cfg.LatencyJobs, func() (err error) {
		toHandler, toDone, err = r.Latency(ctx, cfg.LatencyJobs)
		return err
	}); err != nil {
		return nil, err
	}
	rep.EnqueueToHandler = LatencyOf(toHandler)
	rep.HandlerToDone = LatencyOf(toDone)
	rep.LoadEnd, _ = ReadLoadAvg()
	return rep, nil
}

// Write prints the report.
func (r *JobsReport) Write(w io.Writer) error {
	ew := &ErrWriter{W: w}
	fmt.Fprintf(ew, "claimcheck bench jobs: %s, %d CPUs; load average %s at the start, %s at the end (/proc/loadavg)\n", r.GoVersion, r.NumCPU, r.LoadStart, r.LoadEnd)
	fmt.Fprintf(ew, "database %s, store %s\n", r.Database, r.Store)
	how := "stored as objects"
	if r.Inline {
		how = "inline in their tickets"
	}
	sealed := "unsealed"
	if r.Sealed {
		sealed = "sealed"
	}
	fmt.Fprintf(ew, "payloads of %s, %s, %s; %d workers; handler: the verified payload read to the end\n\n", FormatSize(r.Size), how, sealed, r.Workers)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tjobs\tseconds\tms/job\tjobs/s\tCPU ms/job\tpeak RSS MiB\tpeak RssAnon MiB\tpeak heap MiB\t")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.1f\t%.3f\t%.1f\t%.1f\t%.1f\t\n", p.Name, p.Jobs, p.Seconds, p.MsPerJob(), p.JobsPerSec(), p.CPUMsPerJob(),
			MiBOf(p.PeakRSS), MiBOf(p.PeakAnon), MiBOf(p.PeakHeap))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(ew)
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency, one job at a time\tp50 ms\tp95 ms\tp99 ms\tmax ms\t")
	for _, l := range []struct {
		name string
		l    Latency
	}{{"enqueue → handler", r.EnqueueToHandler}, {"handler → done", r.HandlerToDone}} {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t\n", l.name, l.l.P50, l.l.P95, l.l.P99, l.l.Max)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(ew, "\nwork: from the workers' start until the last handler began; handler → done: until the pipeline took the attempt's outcome (River marks the job completed in batches after); peak RSS: %s, RssAnon sampled every 50 ms\n", r.RSSMethod)
	return ew.Err
}

// JSON is the report's --json form, indented.
func (r *JobsReport) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

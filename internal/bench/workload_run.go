package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/claimcheck/claimcheck/pipeline"
)

// WorkloadConfig configures Workload.
type WorkloadConfig struct {
	// Pipeline is the deployment measured: its job database and store.
	// Required. Its jobs of WorkloadKind are deleted before and after.
	Pipeline *pipeline.Pipeline
	// Database and Store name the job database and the store in the
	// report (redacted: scheme, host and path).
	Database, Store string
	// Jobs is how many jobs are enqueued and worked. Default
	// DefaultWorkloadJobs.
	Jobs int
	// Mix is the size distribution. Default: ParseMix(DefaultMix).
	Mix Mix
	// Seed selects the jobs' sizes (Mix.Sizes): the same seed, the same
	// sizes in the same order.
	Seed uint64
	// Producers enqueue at once; Workers work at once. Defaults
	// DefaultWorkloadProducers and DefaultWorkloadWorkers.
	Producers, Workers int
	// Rate paces the jobs in jobs per second (WorkloadSpec.Rate); 0: as
	// fast as the producers go.
	Rate float64
	// Log, if set, receives a line per phase.
	Log io.Writer
}

// WorkloadReport is the outcome of Workload. Its fields marshal as the
// --json form; sizes in bytes, times in seconds or milliseconds as named.
type WorkloadReport struct {
	Database   string  `json:"database"`
	Store      string  `json:"store"`
	Mix        string  `json:"mix"`
	Seed       uint64  `json:"seed"`
	Jobs       int     `json:"jobs"`
	Producers  int     `json:"producers"`
	Workers    int     `json:"workers"`
	Rate       float64 `json:"rate_jobs_per_s,omitempty"`
	GoVersion  string  `json:"go_version"`
	NumCPU     int     `json:"num_cpu"`
	RSSMethod  string  `json:"rss_method"`
	LoadStart  LoadAvg `json:"load_start"`
	LoadEnd    LoadAvg `json:"load_end"`
	Bytes      int64   `json:"payload_bytes"`
	Seconds    float64 `json:"seconds"`
	JobsPerSec float64 `json:"jobs_per_s"`
	MiBPerSec  float64 `json:"payload_mib_per_s"`
	// Offloaded is how many payloads were stored as objects; the others
	// travelled inline in their tickets (at most InlineThreshold bytes).
	Offloaded       int64 `json:"offloaded"`
	InlineThreshold int64 `json:"inline_threshold_bytes"`
	// Latency is enqueue → handler, in ms: from the start of a job's
	// enqueue to its handler's start, after the payload was verified.
	Latency Latency `json:"enqueue_to_handler_ms"`
	// TableBytesPerJob is what the job tables hold per job (TableMethod).
	TableBytesPerJob float64 `json:"table_bytes_per_job"`
	TableMethod      string  `json:"table_method"`
	CPUSeconds       float64 `json:"cpu_seconds"`
	// PeakRSS (RSSMethod), PeakAnon (RssAnon sampled every 50 ms) and
	// PeakHeap (Go heap objects, sampled every 5 ms) of this process,
	// which ran the producers and the workers.
	StartRSS uint64 `json:"start_rss_bytes"`
	PeakRSS  uint64 `json:"peak_rss_bytes"`
	PeakAnon uint64 `json:"peak_anon_bytes"`
	PeakHeap uint64 `json:"peak_heap_bytes"`
}

// Latency is a distribution's percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// LatencyOf is the p50, p95, p99 and max of sorted latencies in ms
// (Percentile, nearest rank; NaN without any).
func LatencyOf(sorted []float64) Latency {
	return Latency{P50: Percentile(sorted, 50), P95: Percentile(sorted, 95), P99: Percentile(sorted, 99), Max: Percentile(sorted, 100)}
}

// WorkloadContent is the jobs' payloads for sizes: job i's is Stream of
// its size under a seed derived from seed and i, so no two jobs share
// bytes (nor objects). Generated as it is read: nothing is held.
func WorkloadContent(seed uint64, sizes []int64) func(i int) io.Reader {
	return func(i int) io.Reader {
		return Stream(seed^(uint64(i)+1)*0x9e3779b97f4a7c15, sizes[i])
	}
}

// NewContentSeed is a random content seed: a run's payloads differ from
// every earlier run's, so none is deduplicated against an object left in
// the store.
func NewContentSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// Workload measures cfg.Jobs jobs of cfg.Mix through cfg.Pipeline
// (PipelineTarget, RunWorkload): after a warm-up of 4 small jobs, the
// producers enqueue while the workers work, each handler reading its
// verified payload to the end; then it reads the job tables' size
// (TableBytes) and deletes the jobs and their objects. Jobs of
// WorkloadKind left by a killed run are deleted first. Measurements are
// process-wide (Lock). Errors: RunWorkload's, TableBytes', Cleanup's.
func Workload(ctx context.Context, cfg WorkloadConfig) (*WorkloadReport, error) {
	defer Lock()()
	if cfg.Jobs <= 0 {
		cfg.Jobs = DefaultWorkloadJobs
	}
	if len(cfg.Mix) == 0 {
		m, err := ParseMix(DefaultMix)
		if err != nil {
			return nil, err
		}
		cfg.Mix = m
	}
	if cfg.Producers <= 0 {
		cfg.Producers = DefaultWorkloadProducers
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkloadWorkers
	}
	p := cfg.Pipeline
	t := &PipelineTarget{P: p, Kind: WorkloadKind, Tenant: WorkloadTenant, Workers: cfg.Workers}
	defer func() { _ = t.Cleanup(context.WithoutCancel(ctx)) }()
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	if _, err := DeleteKind(ctx, p, WorkloadKind); err != nil {
		return nil, err
	}
	cseed := NewContentSeed()
	warm := []int64{KiB, KiB, KiB, KiB}
	if _, err := RunWorkload(ctx, t, WorkloadSpec{Sizes: warm, Content: WorkloadContent(^cseed, warm), Producers: cfg.Producers}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := t.Cleanup(ctx); err != nil {
		return nil, err
	}
	before, method, err := TableBytes(ctx, p.DB(), p.Dialect(), WorkloadKind)
	if err != nil {
		return nil, err
	}
	sizes := cfg.Mix.Sizes(cfg.Seed, cfg.Jobs)
	m := NewMeter(5 * time.Millisecond)
	rep := &WorkloadReport{Database: RedactURL(cfg.Database), Store: RedactURL(cfg.Store), Mix: cfg.Mix.String(), Seed: cfg.Seed,
		Jobs: cfg.Jobs, Producers: cfg.Producers, Workers: cfg.Workers, Rate: cfg.Rate, GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
		RSSMethod: m.Method(), InlineThreshold: p.Store().InlineThreshold(), TableMethod: method}
	rep.LoadStart, _ = ReadLoadAvg()
	logf("workload: %d jobs of %s, %d producers, %d workers...", cfg.Jobs, rep.Mix, cfg.Producers, cfg.Workers)
	var s WorkloadSample
	cpu0 := CPUSeconds()
	u, err := m.Measure(func() error {
		var err error
		s, err = RunWorkload(ctx, t, WorkloadSpec{Sizes: sizes, Content: WorkloadContent(cseed, sizes), Producers: cfg.Producers, Rate: cfg.Rate})
		return err
	})
	rep.CPUSeconds = CPUSeconds() - cpu0
	if err != nil {
		return nil, err
	}
	rep.LoadEnd, _ = ReadLoadAvg()
	after, _, err := TableBytes(ctx, p.DB(), p.Dialect(), WorkloadKind)
	if err != nil {
		return nil, err
	}
	rep.Bytes, rep.Seconds, rep.JobsPerSec, rep.MiBPerSec = s.Bytes, s.Seconds, s.JobsPerSec(), s.MiBPerSec()
	rep.Latency, rep.Offloaded = LatencyOf(s.LatencyMs), t.Offloaded()
	rep.TableBytesPerJob = float64(after-before) / float64(cfg.Jobs)
	rep.StartRSS, rep.PeakRSS, rep.PeakAnon, rep.PeakHeap = u.StartRSS, u.PeakRSS, u.PeakAnon, u.PeakHeap
	logf("workload: %.2f s, cleaning up", s.Seconds)
	if err := t.Cleanup(ctx); err != nil {
		return nil, err
	}
	return rep, nil
}

// Write prints the report.
func (r *WorkloadReport) Write(w io.Writer) error {
	ew := &ErrWriter{W: w}
	fmt.Fprintf(ew, "claimcheck bench workload: %s, %d CPUs; load average %s at the start, %s at the end (/proc/loadavg)\n", r.GoVersion, r.NumCPU, r.LoadStart, r.LoadEnd)
	fmt.Fprintf(ew, "database %s, store %s\n", r.Database, r.Store)
	pace := "unpaced (the latency includes the wait in the queue the producers fill)"
	if r.Rate > 0 {
		pace = fmt.Sprintf("paced at %g jobs/s", r.Rate)
	}
	fmt.Fprintf(ew, "%d jobs, mix %s (seed %d), %d producers, %d workers, %s; handler: the verified payload read to the end\n", r.Jobs, r.Mix, r.Seed, r.Producers, r.Workers, pace)
	inline := "none inline"
	if r.InlineThreshold >= 0 {
		inline = fmt.Sprintf("%d inline (at most %s)", int64(r.Jobs)-r.Offloaded, FormatSize(r.InlineThreshold))
	}
	fmt.Fprintf(ew, "payloads: %s in all, %d stored as objects, %s\n\n", FormatSize(r.Bytes), r.Offloaded, inline)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "seconds\tjobs/s\tpayload MiB/s\tp50 ms\tp95 ms\tp99 ms\tmax ms\ttable B/job\tCPU ms/job\tpeak RssAnon MiB\tpeak RSS MiB\tpeak heap MiB\t")
	fmt.Fprintf(tw, "%.3f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t%.1f\t%.1f\t%.1f\t\n", r.Seconds, r.JobsPerSec, r.MiBPerSec,
		r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max, r.TableBytesPerJob, r.CPUSeconds*1000/float64(r.Jobs),
		MiBOf(r.PeakAnon), MiBOf(r.PeakRSS), MiBOf(r.PeakHeap))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(ew, "\nseconds: first enqueue to last handler; p50…max: enqueue → handler, from the start of a job's enqueue to its handler's start (after verification)\n")
	fmt.Fprintf(ew, "table B/job: %s\n", r.TableMethod)
	fmt.Fprintf(ew, "CPU, peak RssAnon (sampled every 50 ms), peak RSS (%s, %.1f MiB at the start) and heap: this one process, producers and workers\n", r.RSSMethod, MiBOf(r.StartRSS))
	return ew.Err
}

// JSON is the report's --json form, indented.
func (r *WorkloadReport) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

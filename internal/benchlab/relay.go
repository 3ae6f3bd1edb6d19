package benchlab

import (
	"encoding/json"
	"fmt"
	"github.com/claimcheck/claimcheck/internal/bench"
	"io"
	"text/tabwriter"
)

// The outbox relay's memory target (the requirement): the relay's
// peak RSS with a large backlog (10,000 entries whose payloads total
// 10 GiB) is at most RelayMaxRatio times its peak with a small one (10
// entries of the same payload size).
const RelayMaxRatio = 1.10

// Relay bench defaults.
const (
	RelayDefaultEntries = 10000
	RelayDefaultSmall   = 10
	RelayDefaultTotal   = 10 * bench.GiB
)

// Relay bench phases, as recorded in RelayPhase.Name.
const (
	RelayPhaseSmall = "small"
	RelayPhaseLarge = "large"
)

// RSSMethodChild is how bench relay finds the relay's peak RSS.
const RSSMethodChild = "ru_maxrss of the relay process (wait4 by a launcher process; floor: the launcher's VmHWM as the relay started)"

// RelayPhase is the relay run over one backlog.
type RelayPhase struct {
	Name         string `json:"name"` // RelayPhaseSmall or RelayPhaseLarge
	Entries      int    `json:"entries"`
	PayloadBytes int64  `json:"payload_bytes"` // all the backlog's payloads
	// Setup is the check-in and enqueue of the backlog, in the bench's own
	// process.
	SetupSeconds   float64 `json:"setup_seconds"`
	SetupMiBPerSec float64 `json:"setup_mib_per_s"`
	// The relay, a child process: what it printed, how long it ran (process
	// start to exit) and its peak RSS.
	Sent            int64 `json:"sent"`
	FailedPublishes int64 `json:"failed_publishes"`
	// PublishCalls are the relay's calls to the transport's Publish (one
	// SQS SendMessageBatch each, up to ten entries), and CallsPerEntry
	// PublishCalls / Sent: 1 without batching, 0.1 at best.
	PublishCalls  int64   `json:"publish_calls"`
	CallsPerEntry float64 `json:"publish_calls_per_entry"`
	Seconds       float64 `json:"seconds"`
	EntriesPerSec float64 `json:"entries_per_s"`
	PeakRSS       uint64  `json:"peak_rss_bytes"`
	// SampledHWM and FloorRSS: see ChildUsage.
	SampledHWM uint64 `json:"sampled_hwm_bytes"`
	FloorRSS   uint64 `json:"floor_rss_bytes"`
	FloorBound bool   `json:"floor_bound,omitempty"`
}

// SetUsage records a MeasureChild result.
func (p *RelayPhase) SetUsage(u bench.ChildUsage) {
	p.Seconds = u.Elapsed.Seconds()
	if p.Seconds > 0 {
		p.EntriesPerSec = float64(p.Sent) / p.Seconds
	}
	p.PeakRSS, p.SampledHWM, p.FloorRSS, p.FloorBound = u.MaxRSS, u.SampledHWM, u.Floor, u.FloorBound()
}

// RelayReport is the outcome of `claimcheck bench relay`. Its fields
// marshal as the --json form.
type RelayReport struct {
	Broker      string       `json:"broker"` // credentials removed
	Destination string       `json:"destination"`
	Store       string       `json:"store"`
	Batch       int          `json:"batch"`
	EntryBytes  int64        `json:"entry_bytes"` // each payload
	GoVersion   string       `json:"go_version"`
	OS          string       `json:"os"`
	Arch        string       `json:"arch"`
	NumCPU      int          `json:"num_cpu"`
	RSSMethod   string       `json:"rss_method"`
	Phases      []RelayPhase `json:"phases"`
	// Ratio is the large backlog's peak RSS over the small one's.
	Ratio    float64 `json:"ratio"`
	MaxRatio float64 `json:"max_ratio"`
	// Status is PASS, FAIL, or SKIP where RSS is unavailable or either
	// peak is bound by the bench's own floor (ChildUsage.FloorBound).
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// Judge sets Ratio, MaxRatio, Status and Detail from the small and large
// phases (the first two).
func (r *RelayReport) Judge() {
	r.MaxRatio = RelayMaxRatio
	if len(r.Phases) < 2 {
		r.Status, r.Detail = "SKIP", "needs both backlogs"
		return
	}
	s, l := r.Phases[0], r.Phases[1]
	what := fmt.Sprintf("relay peak RSS with %d entries (%s) at most %.0f%% above %d entries (%s)",
		l.Entries, bench.FormatSizeApprox(l.PayloadBytes), (RelayMaxRatio-1)*100, s.Entries, bench.FormatSizeApprox(s.PayloadBytes))
	switch {
	case r.RSSMethod == bench.RSSMethodNone || s.PeakRSS == 0 || l.PeakRSS == 0:
		r.Status, r.Detail = "SKIP", what+": RSS unavailable on this OS"
		return
	case s.FloorBound || l.FloorBound:
		r.Ratio = float64(l.PeakRSS) / float64(s.PeakRSS)
		r.Status, r.Detail = "SKIP", what+": a peak is no higher than its floor, the launcher's RSS as the relay started, which Linux counts in the relay's ru_maxrss"
		return
	}
	r.Ratio = float64(l.PeakRSS) / float64(s.PeakRSS)
	r.Status = bench.PassFail(r.Ratio <= RelayMaxRatio)
	r.Detail = what
}

// Passed reports whether the check did not fail (PASS or SKIP).
func (r *RelayReport) Passed() bool { return r.Status != "FAIL" }

// Write prints the report: a row per backlog, the ratio and the check.
func (r *RelayReport) Write(w io.Writer) error {
	ew := &bench.ErrWriter{W: w}
	fmt.Fprintf(ew, "claimcheck bench relay: %s %s/%s, %d CPUs\n", r.GoVersion, r.OS, r.Arch, r.NumCPU)
	fmt.Fprintf(ew, "broker %s, destination %s, store %s, batch %d, payloads of %s each\n", r.Broker, r.Destination, r.Store, r.Batch, bench.FormatSizeApprox(r.EntryBytes))
	fmt.Fprintf(ew, "peak RSS: %s\n\n", r.RSSMethod)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backlog\tentries\tpayloads\tsetup s\tsetup MiB/s\trelay peak RSS MiB\tsampled HWM MiB\tfloor MiB\trelay s\tentries/s\tsent\tpublish calls/entry\t")
	for _, p := range r.Phases {
		peak := fmt.Sprintf("%.1f", bench.MiBOf(p.PeakRSS))
		if p.PeakRSS == 0 {
			peak = "n/a"
		}
		if p.FloorBound {
			peak += " (floor)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t%.2f\t%.1f\t%d\t%.3f\t\n", p.Name, p.Entries, bench.FormatSizeApprox(p.PayloadBytes),
			p.SetupSeconds, p.SetupMiBPerSec, peak, bench.MiBOf(p.SampledHWM), bench.MiBOf(p.FloorRSS), p.Seconds, p.EntriesPerSec, p.Sent, p.CallsPerEntry)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(ew)
	if r.Ratio > 0 {
		fmt.Fprintf(ew, "large/small relay peak RSS: %.3f (limit %.2f)\n", r.Ratio, r.MaxRatio)
	}
	fmt.Fprintf(ew, "%s  %s\n", r.Status, r.Detail)
	return ew.Err
}

// JSON is the report's --json form, indented.
func (r *RelayReport) JSON() ([]byte, error) {
	return json.MarshalIndent(r, "", "  ")
}

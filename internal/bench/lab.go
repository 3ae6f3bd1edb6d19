package bench

import "time"

// Meter measures elapsed time, peak RSS and peak Go heap of a function, as
// Run does, for the team's comparison harness (internal/benchlab).
// Measurements are process-wide: hold Lock while measuring.
type Meter struct{ m meter }

// NewMeter returns a Meter sampling the Go heap every interval (and RSS,
// where VmHWM cannot be reset), with the peak-RSS method this machine
// allows (RSSMethodHWM, RSSMethodSampled or RSSMethodNone).
func NewMeter(interval time.Duration) *Meter {
	return &Meter{meter{method: detectRSSMethod(), interval: interval}}
}

// Method is how the Meter finds peak RSS: RSSMethodHWM, RSSMethodSampled
// or RSSMethodNone.
func (m *Meter) Method() string { return m.m.method }

// Usage is one measured run of a function; sizes in bytes, 0 where the
// method or the OS cannot tell.
type Usage struct {
	Elapsed  time.Duration
	StartRSS uint64 // RSS as the measurement started, after a GC
	PeakRSS  uint64
	PeakHeap uint64 // sampled /memory/classes/heap/objects:bytes
	// PeakAnon and PeakFile are the highest RssAnon and RssFile sampled
	// (every StatusEvery heap samples).
	PeakAnon, PeakFile uint64
}

// Measure runs fn and measures it; the error is fn's, or reading
// /proc/self/status's.
func (m *Meter) Measure(fn func() error) (Usage, error) {
	s, err := m.m.measure(fn)
	return Usage{Elapsed: s.elapsed, StartRSS: s.startRSS, PeakRSS: s.peakRSS, PeakHeap: s.peakHeap,
		PeakAnon: s.peakAnon, PeakFile: s.peakFile}, err
}

package bench

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"
)

// RSS measurement methods, as recorded in Report.RSSMethod.
const (
	// RSSMethodHWM reads the kernel's peak RSS (VmHWM in /proc/self/status),
	// reset before each measurement by writing "5" to /proc/self/clear_refs
	// (Linux 4.0+). It sees every page the process touched, however briefly.
	RSSMethodHWM = "VmHWM, reset via /proc/self/clear_refs"
	// RSSMethodSampled samples VmRSS every Config.SampleInterval: the fallback
	// when the peak cannot be reset. It can miss a spike shorter than the
	// interval.
	RSSMethodSampled = "VmRSS sampled"
	// RSSMethodNone means /proc/self/status is unreadable (not Linux): RSS
	// figures are 0 and the memory checks are skipped.
	RSSMethodNone = "unavailable"
)

const (
	procStatus    = "/proc/self/status"
	procClearRefs = "/proc/self/clear_refs"
	heapMetric    = "/memory/classes/heap/objects:bytes"
)

// sink keeps detectRSSMethod's probe allocation on the heap.
var sink []byte

// status is what readStatus reads from /proc/self/status, in bytes.
type status struct {
	hwm, rss uint64 // VmHWM, VmRSS
	// anon and file split rss: anonymous pages (heap, stacks, buffers) and
	// file-backed ones (RssAnon, RssFile; mostly the executable's own
	// text and read-only data). Zero on kernels before 4.5, which lack them.
	anon, file uint64
}

// readStatus reads VmHWM, VmRSS, RssAnon and RssFile from /proc/self/status.
func readStatus() (status, error) { return readStatusOf(procStatus) }

// Memory returns this process's anonymous RSS (RssAnon: heap, stacks,
// buffers; 0 on kernels before 4.5) and its peak RSS (VmHWM), in bytes,
// from /proc/self/status. Errors: the file is unreadable (not Linux).
func Memory() (anon, hwm uint64, err error) {
	st, err := readStatus()
	return st.anon, st.hwm, err
}

func readStatusOf(path string) (status, error) {
	var st status
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	var gotHWM, gotRSS bool
	for line := range bytes.Lines(b) {
		var dst *uint64
		switch {
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst, gotHWM = &st.hwm, true
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst, gotRSS = &st.rss, true
		case bytes.HasPrefix(line, []byte("RssAnon:")):
			dst = &st.anon
		case bytes.HasPrefix(line, []byte("RssFile:")):
			dst = &st.file
		default:
			continue
		}
		f := bytes.Fields(line) // "VmHWM:", "1234", "kB"
		if len(f) != 3 || string(f[2]) != "kB" {
			return st, errors.New("bench: unexpected line in " + path + ": " + string(bytes.TrimSpace(line)))
		}
		kb, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return st, err
		}
		*dst = kb << 10
	}
	if !gotHWM || !gotRSS {
		return st, errors.New("bench: no VmHWM/VmRSS in " + path)
	}
	return st, nil
}

func resetHWM() error {
	return os.WriteFile(procClearRefs, []byte("5"), 0)
}

// settle collects garbage and returns freed memory to the OS, so that each
// measurement starts from the same floor.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

// detectRSSMethod checks, rather than assumes, that the peak can be reset:
// it raises the peak with a 16 MiB touched allocation, frees it, resets, and
// requires VmHWM to have dropped. The answer is computed once per process.
var detectRSSMethod = sync.OnceValue(probeRSSMethod)

func probeRSSMethod() string {
	if _, err := readStatus(); err != nil {
		return RSSMethodNone
	}
	sink = make([]byte, 16<<20)
	for i := 0; i < len(sink); i += 4096 {
		sink[i] = 1
	}
	sink = nil
	settle()
	before, err := readStatus()
	if err != nil {
		return RSSMethodSampled
	}
	if err := resetHWM(); err != nil {
		return RSSMethodSampled
	}
	after, err := readStatus()
	if err != nil || after.hwm+8<<20 > before.hwm || after.hwm > after.rss+(1<<20) {
		return RSSMethodSampled
	}
	return RSSMethodHWM
}

// sample is one measured run of a function.
type sample struct {
	elapsed  time.Duration
	startRSS uint64 // RSS when the measurement started (after settle)
	peakRSS  uint64
	peakHeap uint64 // sampled /memory/classes/heap/objects:bytes
	// peakAnon and peakFile are the highest RssAnon and RssFile sampled
	// (every statusEvery samples; not necessarily at the same moment, nor at
	// the moment of peakRSS): what of the resident set the process holds
	// itself, and what are pages of files it maps, mostly its own
	// executable's. Zero where unavailable.
	peakAnon, peakFile uint64
}

// meter measures elapsed time, peak RSS and peak Go heap of a function.
// Measurements are process-wide: run one at a time.
type meter struct {
	method   string
	interval time.Duration
}

func (m *meter) measure(fn func() error) (sample, error) {
	settle()
	var s sample
	if m.method == RSSMethodHWM {
		if err := resetHWM(); err != nil {
			return s, err
		}
	}
	if m.method != RSSMethodNone {
		st, err := readStatus()
		if err != nil {
			return s, err
		}
		s.startRSS = st.rss
	}
	p := m.startPoller()
	start := time.Now()
	err := fn()
	s.elapsed = time.Since(start)
	p.finish()
	s.peakHeap, s.peakAnon, s.peakFile = p.peakHeap, p.peakAnon, p.peakFile
	switch m.method {
	case RSSMethodHWM:
		st, rerr := readStatus()
		if rerr != nil && err == nil {
			err = rerr
		}
		hwm := st.hwm
		// The kernel batches RSS counters per CPU, so VmHWM read after the
		// run can fall a few pages below the VmRSS read at its start (seen:
		// 96 KiB). The start is a sample of the run's RSS, so the peak is
		// at least that.
		s.peakRSS = max(hwm, s.startRSS)
	case RSSMethodSampled:
		s.peakRSS = max(p.peakRSS, s.startRSS)
	}
	return s, err
}

// poller samples the Go heap, RssAnon and RssFile (and, in sampled mode,
// RSS) until finished.
type poller struct {
	stop               chan struct{}
	wg                 sync.WaitGroup
	rss                bool
	metric             []metrics.Sample
	peakHeap           uint64
	peakRSS            uint64
	peakAnon, peakFile uint64
}

func (m *meter) startPoller() *poller {
	p := &poller{
		stop:   make(chan struct{}),
		rss:    m.method == RSSMethodSampled,
		metric: []metrics.Sample{{Name: heapMetric}},
	}
	p.poll(true)
	p.wg.Go(func() {
		t := time.NewTicker(m.interval)
		defer t.Stop()
		for tick := 1; ; tick++ {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.poll(p.rss || tick%StatusEvery == 0)
			}
		}
	})
	return p
}

// StatusEvery is how many heap samples the poller takes per read of
// /proc/self/status for RssAnon and RssFile (every 50 ms at the 5 ms
// interval), unless RSS itself is sampled: each read costs tens of µs
// of CPU, which at every 5 ms tick added about 0.1 s per 10 s measured to
// the CPU the small-job comparison divides.
const StatusEvery = 10

// poll samples the Go heap and, if status, /proc/self/status.
func (p *poller) poll(status bool) {
	metrics.Read(p.metric)
	if v := p.metric[0].Value; v.Kind() == metrics.KindUint64 {
		p.peakHeap = max(p.peakHeap, v.Uint64())
	}
	if !status {
		return
	}
	if st, err := readStatus(); err == nil {
		p.peakAnon, p.peakFile = max(p.peakAnon, st.anon), max(p.peakFile, st.file)
		if p.rss {
			p.peakRSS = max(p.peakRSS, st.rss)
		}
	}
}

// finish stops the sampling goroutine and takes a last sample.
func (p *poller) finish() {
	close(p.stop)
	p.wg.Wait()
	p.poll(true)
}

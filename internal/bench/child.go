package bench

import (
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stream is the deterministic pseudo-random payload of n bytes for seed
// (ChaCha8 keyed by seed and n), generated as it is read: distinct seeds
// give distinct content, hence distinct content-addressed keys.
func Stream(seed uint64, n int64) io.Reader { return stream(seed, n) }

// FormatSizeApprox is FormatSize where the size is an exact binary unit,
// and otherwise the bytes with an approximation: "1073741 B ≈ 1.02 MiB".
func FormatSizeApprox(n int64) string {
	exact := FormatSize(n)
	if !strings.HasSuffix(exact, " B") || n < KiB {
		return exact
	}
	switch {
	case n >= GiB:
		return fmt.Sprintf("%s ≈ %.2f GiB", exact, float64(n)/GiB)
	case n >= MiB:
		return fmt.Sprintf("%s ≈ %.2f MiB", exact, float64(n)/MiB)
	}
	return fmt.Sprintf("%s ≈ %.2f KiB", exact, float64(n)/KiB)
}

// ChildUsage is what MeasureChild measured of one child process.
type ChildUsage struct {
	Elapsed time.Duration `json:"elapsed_ns"`
	// MaxRSS is the child's ru_maxrss in bytes; MaxRSSOK is false where
	// the OS does not report it (not Linux).
	MaxRSS   uint64 `json:"max_rss_bytes"`
	MaxRSSOK bool   `json:"max_rss_ok"`
	// Floor is the measuring process's VmHWM as the child started, after
	// GC and a reset of its peak. Go starts children with vfork
	// (CLONE_VM), and Linux's exec records the peak RSS of the address
	// space it leaves, the parent's, as the child's starting ru_maxrss:
	// MaxRSS is the child's own peak only where it exceeds Floor. Hence
	// bench relay measures the relay from a launcher process that has done
	// nothing else (`claimcheck bench relay measure`).
	Floor uint64 `json:"floor_bytes"`
	// SampledHWM is the child's own VmHWM (/proc/<pid>/status), sampled
	// while it ran: a cross-check that misses only its last moments.
	SampledHWM uint64 `json:"sampled_hwm_bytes"`
}

// FloorBound reports that MaxRSS may be this process's floor rather than
// the child's own peak.
func (u ChildUsage) FloorBound() bool { return u.MaxRSSOK && u.Floor > 0 && u.MaxRSS <= u.Floor }

// MeasureChild runs cmd to its end and measures its elapsed time and peak
// RSS. It first collects this process's garbage, returns the memory to the
// OS and resets its own peak (see ChildUsage.Floor). Like Run, it is
// process-wide: nothing else should run meanwhile. The error is cmd's.
func MeasureChild(cmd *exec.Cmd, interval time.Duration) (ChildUsage, error) {
	runMu.Lock()
	defer runMu.Unlock()
	if interval <= 0 {
		interval = 10 * time.Millisecond
	}
	settle()
	_ = resetHWM() // fails off Linux, where there is no ru_maxrss either
	var u ChildUsage
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return u, err
	}
	// Start returns once the child has exec'd: our peak now is the floor
	// the kernel copied into its ru_maxrss.
	if st, err := readStatus(); err == nil {
		u.Floor = st.hwm
	}

	status := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status"
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sampled uint64
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if st, err := readStatusOf(status); err == nil {
				sampled = max(sampled, st.hwm)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	err := cmd.Wait()
	u.Elapsed = time.Since(start)
	close(stop)
	wg.Wait()
	u.SampledHWM = sampled
	if cmd.ProcessState != nil {
		u.MaxRSS, u.MaxRSSOK = childMaxRSS(cmd.ProcessState)
	}
	return u, err
}

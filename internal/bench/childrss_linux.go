//go:build linux

package bench

import (
	"os"
	"syscall"
)

// childMaxRSS is an exited child's ru_maxrss, in bytes (Linux reports KiB).
func childMaxRSS(ps *os.ProcessState) (uint64, bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil || ru.Maxrss <= 0 {
		return 0, false
	}
	return uint64(ru.Maxrss) << 10, true
}

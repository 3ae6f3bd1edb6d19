//go:build unix

package bench

import "syscall"

// CPUSeconds is this process's user and system CPU time so far, in
// seconds (getrusage RUSAGE_SELF).
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

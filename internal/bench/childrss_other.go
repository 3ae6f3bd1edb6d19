//go:build !linux

package bench

import "os"

// childMaxRSS reports nothing off Linux: ru_maxrss is in other units or
// absent there, and the relay bench prints RSS as unavailable.
func childMaxRSS(*os.ProcessState) (uint64, bool) { return 0, false }

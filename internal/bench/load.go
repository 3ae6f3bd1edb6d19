package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// LoadAvg is the system's load average over 1, 5 and 15 minutes, from
// /proc/loadavg (zero where there is none): printed beside every figure
// taken on a machine that may be shared.
type LoadAvg struct {
	One     float64 `json:"1m"`
	Five    float64 `json:"5m"`
	Fifteen float64 `json:"15m"`
}

func (l LoadAvg) String() string { return fmt.Sprintf("%.2f %.2f %.2f", l.One, l.Five, l.Fifteen) }

// ReadLoadAvg reads /proc/loadavg; ok is false where it cannot.
func ReadLoadAvg() (l LoadAvg, ok bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l, false
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return l, false
	}
	var v [3]float64
	for i := range v {
		if v[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return LoadAvg{}, false
		}
	}
	return LoadAvg{v[0], v[1], v[2]}, true
}

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Write prints the report: environment, one row per size and phase, the
// peak per size, and the project's checks as PASS/FAIL lines.
func (r *Report) Write(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "claimcheck bench: %s %s/%s, %d CPUs (GOMAXPROCS %d)\n", r.GoVersion, r.OS, r.Arch, r.NumCPU, r.GOMAXPROCS)
	fmt.Fprintf(ew, "store %s, spool %s\n", r.Store, r.SpoolDir)
	fmt.Fprintf(ew, "peak RSS: %s; peak heap: %s sampled every %s\n\n", r.RSSMethod, heapMetric, r.SampleInterval)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tphase\tseconds\tMiB/s\tpeak RSS MiB\tpeak heap MiB\tstart RSS MiB\tsha256 ok\t")
	for _, res := range r.Results {
		ok := "yes"
		if !res.Verified {
			ok = "NO"
		}
		if res.Deduplicated {
			ok += " (dedup: nothing written)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n",
			FormatSize(res.Size), res.Phase, res.Seconds, res.MiBPerSec, mib(res.PeakRSS), mib(res.PeakHeap), mib(res.StartRSS), ok)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(ew)
	seen := map[int64]bool{}
	for _, res := range r.Results {
		if seen[res.Size] {
			continue
		}
		seen[res.Size] = true
		peak, _ := r.PeakRSS(res.Size)
		fmt.Fprintf(ew, "peak RSS %s (check-in, open, stream): %.1f MiB\n", FormatSize(res.Size), mib(peak))
	}
	for _, c := range r.Checks {
		fmt.Fprintf(ew, "%s  %s: %.1f MiB (limit %.1f MiB; %s)\n", c.Status, c.Name, c.ValueMiB, c.LimitMiB, c.Detail)
	}
	return ew.err
}

// JSON is the report's --json form, indented.
func (r *Report) JSON() ([]byte, error) {
	return json.MarshalIndent(r, "", "  ")
}

// errWriter remembers the first write error and drops later writes.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Write prints the report: environment, one row per size, variant and
// phase, the peak per size and variant, encrypted over plain throughput per
// size and phase, on S3 claimcheck over the plain SDK per size, variant and
// phase, and the project's checks as PASS/FAIL lines.
func (r *Report) Write(w io.Writer) error {
	ew := &ErrWriter{W: w}
	fmt.Fprintf(ew, "claimcheck bench: %s %s/%s, %d CPUs (GOMAXPROCS %d)\n", r.GoVersion, r.OS, r.Arch, r.NumCPU, r.GOMAXPROCS)
	fmt.Fprintf(ew, "store %s, spool %s\n", r.Store, r.SpoolDir)
	fmt.Fprintf(ew, "peak RSS: %s; peak heap: %s sampled every %s\n", r.RSSMethod, heapMetric, r.SampleInterval)
	if r.Rounds > 1 {
		fmt.Fprintf(ew, "%d rounds per size and variant: fastest round's time, highest round's peaks\n", r.Rounds)
	}
	if r.S3Concurrency > 0 {
		fmt.Fprintf(ew, "s3: parts of %s, %d in flight (memory limit %s + %s)\n",
			FormatSize(r.S3PartBytes), r.S3Concurrency, FormatSize(LimitPeakRSS), FormatSize(r.S3PartBytes*int64(r.S3Concurrency)))
	}
	if len(r.SDKRatios) > 0 {
		fmt.Fprintf(ew, "sdk: the AWS SDK alone on the same client: transfer manager upload (same part size, concurrency, CRC32C checksums), GetObject to io.Discard; its rows check sizes only\n")
	}
	fmt.Fprintln(ew)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tvariant\tphase\tseconds\tMiB/s\tpeak RSS MiB\tpeak heap MiB\tstart RSS MiB\tsha256 ok\t")
	for _, res := range r.Results {
		ok := "yes"
		if res.Variant == VariantSDK {
			ok = "n/a (size ok)"
		}
		if !res.Verified {
			ok = "NO"
		}
		if res.Deduplicated {
			ok += " (dedup: nothing written)"
		}
		variant := res.Variant
		if variant == "" {
			variant = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n",
			FormatSize(res.Size), variant, res.Phase, res.Seconds, res.MiBPerSec, MiBOf(res.PeakRSS), MiBOf(res.PeakHeap), MiBOf(res.StartRSS), ok)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(ew)
	type sizeVariant struct {
		size    int64
		variant string
	}
	seen := map[sizeVariant]bool{}
	var sizes []int64
	for _, res := range r.Results {
		k := sizeVariant{res.Size, res.Variant}
		if res.Phase == PhaseNaive || seen[k] {
			continue
		}
		if !seen[sizeVariant{res.Size, ""}] {
			sizes = append(sizes, res.Size)
			seen[sizeVariant{res.Size, ""}] = true
		}
		seen[k] = true
		peak, _ := r.PeakRSSOf(res.Size, res.Variant)
		phases := "check-in, open, stream"
		if res.Variant == VariantSDK {
			phases = "upload, download"
		}
		fmt.Fprintf(ew, "peak RSS %s %s (%s): %.1f MiB\n", FormatSize(res.Size), res.Variant, phases, MiBOf(peak))
	}

	var ratios bytes.Buffer
	tw = tabwriter.NewWriter(&ratios, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tphase\tplain MiB/s\tencrypted MiB/s\tencrypted/plain\t")
	haveRatios := false
	for _, n := range sizes {
		for _, phase := range []string{PhaseCheckIn, PhaseOpen, PhaseStream} {
			ratio, ok := r.Ratio(n, phase)
			if !ok {
				continue
			}
			haveRatios = true
			p, _ := r.Result(n, VariantPlain, phase)
			e, _ := r.Result(n, VariantEncrypted, phase)
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f%%\t\n", FormatSize(n), phase, p.MiBPerSec, e.MiBPerSec, ratio*100)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if haveRatios {
		fmt.Fprintln(ew)
		_, _ = ew.Write(ratios.Bytes())
	}
	if len(r.SDKRatios) > 0 {
		fmt.Fprintln(ew)
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "size\tvariant\tphase\tMiB/s\tsdk phase\tsdk MiB/s\tclaimcheck/sdk\t")
		for _, c := range r.SDKRatios {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%.1f\t%.1f%%\t\n", FormatSize(c.Size), c.Variant, c.Phase, c.MiBPerSec, c.SDKPhase, c.SDKMiBPS, c.Ratio*100)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(ew)
	for _, c := range r.Checks {
		if c.MinRatio > 0 {
			fmt.Fprintf(ew, "%s  %s: %.1f%% (limit %.0f%%; %s)\n", c.Status, c.Name, c.Ratio*100, c.MinRatio*100, c.Detail)
			continue
		}
		fmt.Fprintf(ew, "%s  %s: %.1f MiB (limit %.1f MiB; %s)\n", c.Status, c.Name, c.ValueMiB, c.LimitMiB, c.Detail)
	}
	return ew.Err
}

// JSON is the report's --json form, indented.
func (r *Report) JSON() ([]byte, error) {
	return json.MarshalIndent(r, "", "  ")
}

// ErrWriter remembers the first write error and drops later writes.
type ErrWriter struct {
	W   io.Writer
	Err error
}

// Write writes p to W unless an earlier write failed.
func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.Err != nil {
		return 0, e.Err
	}
	n, err := e.W.Write(p)
	e.Err = err
	return n, err
}

// sdkPhase is the SDK phase a claimcheck phase is compared with.
var sdkPhase = map[string]string{PhaseCheckIn: PhaseUpload, PhaseOpen: PhaseDownload, PhaseStream: PhaseDownload}

// sdkRatios compares every claimcheck phase with the SDK's, size by size,
// when the SDK was measured.
func (r *Report) sdkRatios() []SDKRatio {
	var out []SDKRatio
	for _, res := range r.Results {
		base, ok := sdkPhase[res.Phase]
		if !ok || res.Variant == VariantSDK {
			continue
		}
		sdk, ok := r.Result(res.Size, VariantSDK, base)
		if !ok || sdk.MiBPerSec <= 0 {
			continue
		}
		out = append(out, SDKRatio{Size: res.Size, Variant: res.Variant, Phase: res.Phase, SDKPhase: base,
			MiBPerSec: res.MiBPerSec, SDKMiBPS: sdk.MiBPerSec, Ratio: res.MiBPerSec / sdk.MiBPerSec})
	}
	return out
}

package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// DefaultMix is the workload's default size distribution, as ParseMix
// reads it: the document jobs of the claim-check articles, "mostly under
// a megabyte, a slow tail to forty" (issue 29): 90% of the jobs up to
// 64 KiB, 9% from 64 KiB to 1 MiB, 1% from 1 MiB to 40 MiB.
const DefaultMix = "90%:1B-64KiB,9%:64KiB-1MiB,1%:1MiB-40MiB"

// Limits of a Mix.
const (
	// MaxMixBuckets is the most buckets a mix may have.
	MaxMixBuckets = 16
	// MaxMixSize is the largest payload a mix may name, in bytes.
	MaxMixSize = 1 * GiB
)

// MixBucket is one share of a Mix: Percent of the jobs, each of a size
// drawn uniformly from Min to Max bytes, both included.
type MixBucket struct {
	Percent  float64 `json:"percent"`
	Min, Max int64
}

// Mix is a distribution of payload sizes: buckets whose percentages add
// up to 100.
type Mix []MixBucket

// ParseMix reads a size distribution: comma-separated buckets
// PERCENT%:MIN-MAX (a size drawn uniformly between MIN and MAX bytes, both
// included) or PERCENT%:SIZE (that size exactly), sizes as go-humanize
// reads them (4KiB, 1MiB, 1000000), from 1 B to MaxMixSize; the '%' is
// optional; percentages above 0, adding up to 100 (±0.001); at most
// MaxMixBuckets buckets. DefaultMix is an example. Errors name the bucket
// and what is wrong with it.
func ParseMix(s string) (Mix, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty mix: want buckets such as %s", DefaultMix)
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxMixBuckets {
		return nil, fmt.Errorf("%d buckets: at most %d", len(parts), MaxMixBuckets)
	}
	var m Mix
	total := 0.0
	for _, part := range parts {
		part = strings.TrimSpace(part)
		pct, sizes, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("bucket %q: want PERCENT%%:MIN-MAX or PERCENT%%:SIZE", part)
		}
		p, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(pct), "%"), 64)
		if err != nil || math.IsNaN(p) || p <= 0 || p > 100 {
			return nil, fmt.Errorf("bucket %q: percentage %q: want a number above 0, at most 100", part, pct)
		}
		lo, hi, isRange := strings.Cut(sizes, "-")
		if !isRange {
			hi = lo
		}
		b := MixBucket{Percent: p}
		if b.Min, err = parseMixSize(lo); err != nil {
			return nil, fmt.Errorf("bucket %q: %w", part, err)
		}
		if b.Max, err = parseMixSize(hi); err != nil {
			return nil, fmt.Errorf("bucket %q: %w", part, err)
		}
		if b.Min > b.Max {
			return nil, fmt.Errorf("bucket %q: %s is above %s", part, FormatSize(b.Min), FormatSize(b.Max))
		}
		total += p
		m = append(m, b)
	}
	if math.Abs(total-100) > 0.001 {
		return nil, fmt.Errorf("the percentages add up to %g, not 100", total)
	}
	return m, nil
}

func parseMixSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > MaxMixSize {
		return 0, fmt.Errorf("size %q: want 1 B to %s, such as 64KiB or 1MiB", s, FormatSize(MaxMixSize))
	}
	return int64(n), nil
}

// String is the mix as ParseMix reads it back.
func (m Mix) String() string {
	parts := make([]string, len(m))
	for i, b := range m {
		sizes := FormatSize(b.Min)
		if b.Max != b.Min {
			sizes += "-" + FormatSize(b.Max)
		}
		parts[i] = strconv.FormatFloat(b.Percent, 'g', -1, 64) + "%:" + strings.ReplaceAll(sizes, " ", "")
	}
	return strings.Join(parts, ",")
}

// Sizes draws n payload sizes in bytes from the mix, deterministically for
// seed (math/rand/v2's PCG): a bucket by its percentage, then a size
// uniformly within it.
func (m Mix) Sizes(seed uint64, n int) []int64 {
	r := rand.New(rand.NewPCG(seed, 0x636c61696d6d6978)) // "claimmix"
	out := make([]int64, n)
	for i := range out {
		x := r.Float64() * 100
		b := m[len(m)-1]
		for _, c := range m {
			if x < c.Percent {
				b = c
				break
			}
			x -= c.Percent
		}
		out[i] = b.Min + r.Int64N(b.Max-b.Min+1)
	}
	return out
}

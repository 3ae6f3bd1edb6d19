package bench

import (
	"math"
	"slices"
	"testing"
)

// TestParseMix: the default and hand-written mixes parse to their
// buckets and print back as they parse; bad ones are refused.
func TestParseMix(t *testing.T) {
	m, err := ParseMix(DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	want := Mix{{90, 1, 64 * KiB}, {9, 64 * KiB, MiB}, {1, MiB, 40 * MiB}}
	if len(m) != len(want) {
		t.Fatalf("%v, want %v", m, want)
	}
	for i := range m {
		if m[i] != want[i] {
			t.Fatalf("bucket %d: %v, want %v", i, m[i], want[i])
		}
	}
	if m.String() != DefaultMix {
		t.Errorf("String() = %q, want %q", m.String(), DefaultMix)
	}
	if m, err := ParseMix(" 50 : 4KiB , 50%:1000-2000 "); err != nil || len(m) != 2 || m[0].Min != 4*KiB || m[0].Max != 4*KiB || m[1].Min != 1000 {
		t.Errorf("spaces, a fixed size and plain numbers: %v, %v", m, err)
	}
	for _, bad := range []string{
		"", "90%", "90%:1B-64KiB", // not 100
		"100%:0-1KiB", "100%:2KiB-1KiB", "100%:2GiB", "0%:1KiB,100%:1KiB", "-5%:1KiB,105%:1KiB",
		"NaN%:1KiB", "100%:1KiB-", "100%:x", "101%:1KiB",
		"6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6.25%:1B,6%:1B,0.25%:1B",
	} {
		if m, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) = %v, want an error", bad, m)
		}
	}
}

// TestMixSizes: sizes are deterministic for a seed, within their
// buckets, and near the buckets' shares.
func TestMixSizes(t *testing.T) {
	m, err := ParseMix(DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.Sizes(7, 20000), m.Sizes(7, 20000)
	count := make([]int, len(m))
	for i, n := range a {
		if n != b[i] {
			t.Fatalf("size %d differs between two draws of seed 7: %d, %d", i, n, b[i])
		}
		if n < 1 || n > 40*MiB {
			t.Fatalf("size %d out of the mix: %d", i, n)
		}
		switch {
		case n <= 64*KiB:
			count[0]++
		case n <= MiB:
			count[1]++
		default:
			count[2]++
		}
	}
	for i, c := range count {
		share := float64(c) / float64(len(a)) * 100
		if math.Abs(share-m[i].Percent) > m[i].Percent*0.2+0.3 {
			t.Errorf("bucket %d: %.2f%% of the sizes, want about %g%%", i, share, m[i].Percent)
		}
	}
	if c := m.Sizes(8, 100); c[0] == a[0] && c[1] == a[1] && c[2] == a[2] {
		t.Error("seeds 7 and 8 drew the same first sizes")
	}
}

// FuzzParseMix: ParseMix of outside input (the --mix flag) never panics;
// what it accepts has 1 to MaxMixBuckets buckets adding up to 100, sizes
// from 1 B to MaxMixSize, prints back to the same mix, and draws sizes
// within it.
func FuzzParseMix(f *testing.F) {
	for _, s := range []string{DefaultMix, "100%:4KiB", "50:1-2,50:3-4", "", "%:", "1e2%:1B", ",", "100%:1KiB-1MiB-2MiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMix(s)
		if err != nil {
			return
		}
		if len(m) == 0 || len(m) > MaxMixBuckets {
			t.Fatalf("%q: %d buckets", s, len(m))
		}
		total := 0.0
		for _, b := range m {
			if b.Percent <= 0 || b.Min < 1 || b.Min > b.Max || b.Max > MaxMixSize {
				t.Fatalf("%q: bucket %+v", s, b)
			}
			total += b.Percent
		}
		if math.Abs(total-100) > 0.001 {
			t.Fatalf("%q: percentages add up to %g", s, total)
		}
		again, err := ParseMix(m.String())
		if err != nil || len(again) != len(m) {
			t.Fatalf("%q printed as %q, which parses to %v, %v", s, m.String(), again, err)
		}
		for i := range m {
			if again[i].Min != m[i].Min || again[i].Max != m[i].Max || math.Abs(again[i].Percent-m[i].Percent) > 1e-9 {
				t.Fatalf("%q printed as %q: bucket %d %+v, want %+v", s, m.String(), i, again[i], m[i])
			}
		}
		for _, n := range m.Sizes(1, 50) {
			if !slices.ContainsFunc(m, func(b MixBucket) bool { return b.Min <= n && n <= b.Max }) {
				t.Fatalf("%q: drew %d, in none of its buckets", s, n)
			}
		}
	})
}

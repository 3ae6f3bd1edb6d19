package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestMeterSplitsRSS measures a function that holds 32 MiB of touched
// memory for 200 ms (four of the 50 ms samples of RssAnon) and checks
// that the usage reports that memory as anonymous, the executable's pages
// as file-backed, and neither above the peak RSS.
func TestMeterSplitsRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RssAnon and RssFile are Linux's")
	}
	const held = 32 * MiB
	defer Lock()()
	s, err := NewMeter(5 * time.Millisecond).Measure(func() error {
		b := make([]byte, held)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		time.Sleep(200 * time.Millisecond)
		runtime.KeepAlive(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.PeakAnon < held || s.PeakFile == 0 || s.PeakAnon > s.PeakRSS || s.PeakFile > s.PeakRSS {
		t.Fatalf("peak RSS %d, anonymous %d, file-backed %d bytes; want anonymous at least the %d held, file-backed above 0, neither above the peak",
			s.PeakRSS, s.PeakAnon, s.PeakFile, held)
	}
}

// TestReadStatusOf reads a /proc/<pid>/status file's figures, and refuses
// one without VmHWM (an exited, zombie process) or with another unit.
func TestReadStatusOf(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	st, err := readStatusOf(write("live", "Name:\tclaimcheck\nVmHWM:\t  100 kB\nVmRSS:\t   90 kB\nRssAnon:\t   30 kB\nRssFile:\t   60 kB\nRssShmem:\t 0 kB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (status{hwm: 100 << 10, rss: 90 << 10, anon: 30 << 10, file: 60 << 10}); st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
	// Before Linux 4.5: no RssAnon and RssFile, which read as 0.
	if st, err := readStatusOf(write("old", "VmHWM:\t100 kB\nVmRSS:\t90 kB\n")); err != nil || st.anon != 0 || st.rss != 90<<10 {
		t.Fatalf("without RssAnon: %+v, %v", st, err)
	}
	if _, err := readStatusOf(write("zombie", "Name:\tclaimcheck\nState:\tZ (zombie)\n")); err == nil {
		t.Fatal("a status without VmHWM read without an error")
	}
	if _, err := readStatusOf(write("unit", "VmHWM:\t100 MB\nVmRSS:\t90 kB\n")); err == nil {
		t.Fatal("a status in MB read without an error")
	}
}

package cli

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestJobsLimitSince: jobs and dead take --limit N (the oldest N) and
// --since as a duration before now or a time.
func TestJobsLimitSince(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.submit("--kind", "pdf-info", "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf"))
	second := b.submit("--kind", "pdf-info", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
	var created []struct {
		ID        int64     `json:"id"`
		CreatedAt time.Time `json:"created_at"`
	}
	if err := json.Unmarshal([]byte(b.ok("jobs", "--json")), &created); err != nil || len(created) != 2 || created[1].ID != second.ID {
		t.Fatalf("jobs --json: %v %+v", err, created)
	}
	cut := created[1].CreatedAt // at or after: the second job and those after it
	third := b.submit("--kind", "pdf-info", "--tenant", "acme", "--allow-empty", "-")
	ids := func(js []jobJSON) []int64 {
		var out []int64
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	for _, tc := range []struct {
		args []string
		want []int64
	}{
		{nil, []int64{first.ID, second.ID, third.ID}},
		{[]string{"--limit", "2"}, []int64{first.ID, second.ID}},
		{[]string{"--limit", "0"}, []int64{first.ID, second.ID, third.ID}},
		{[]string{"--since", "1h"}, []int64{first.ID, second.ID, third.ID}},
		{[]string{"--since", cut.Format(time.RFC3339Nano)}, []int64{second.ID, third.ID}},
		{[]string{"--since", cut.Format(time.RFC3339Nano), "--limit", "1"}, []int64{second.ID}},
		{[]string{"--since", cut.Add(time.Hour).Format(time.RFC3339Nano)}, nil},
	} {
		if got := ids(b.jobs(tc.args...)); !slicesEqual(got, tc.want) {
			t.Errorf("jobs %s: ids %v, want %v", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	// Two dead letters: both payloads deleted.
	for _, p := range b.objects() {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	b.dead("work", "--kind", "pdf-info", "--until-empty")
	dead := b.jobs("--state", "dead")
	if len(dead) < 2 {
		t.Fatalf("want at least 2 dead letters, have %+v", dead)
	}
	rows := func(out string) int { return strings.Count(strings.TrimSpace(out), "\n") } // lines after the header
	if out := b.ok("dead", "--limit", "1"); rows(out) != 1 || !strings.HasPrefix(strings.Split(out, "\n")[1], strconv.FormatInt(dead[0].ID, 10)+" ") {
		t.Errorf("dead --limit 1: want one row, job %d's:\n%s", dead[0].ID, out)
	}
	if out := b.ok("dead", "--since", "1h"); rows(out) != len(dead) {
		t.Errorf("dead --since 1h does not list all %d dead letters:\n%s", len(dead), out)
	}
	if out := b.ok("dead", "--since", "2099-01-01"); rows(out) != 0 {
		t.Errorf("dead --since 2099-01-01 lists dead letters:\n%s", out)
	}
	for _, args := range [][]string{{"jobs", "--limit", "-1"}, {"dead", "--since", "soon"}} {
		if r := b.run("", args...); r.code != 2 || !strings.Contains(r.stderr, args[1]) {
			t.Errorf("%s: exit %d, want 2 naming %s\n%s", strings.Join(args, " "), r.code, args[1], r.stderr)
		}
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// rateRE matches progressbar's rate, e.g. "(12 MB/s)".
var rateRE = regexp.MustCompile(`\(([0-9.]+) ([kMGTP]?B)/s\)`)

// rates returns every rate (bytes per second) a progress bar printed.
func rates(t *testing.T, out string) []float64 {
	t.Helper()
	mult := map[string]float64{"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15}
	var rs []float64
	for _, m := range rateRE.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatalf("rate %q: %v", m[0], err)
		}
		rs = append(rs, v*mult[m[2]])
	}
	return rs
}

// TestCheckInProgressRate: the bar's rate, from its first update, is never
// more than the bytes read divided by the time since the bar was made (it
// printed "266 GB/s" when its clock started at the first update). Real
// work (hashing 8 MiB) stands between making the bar and its first update,
// as a check-in's first read follows its start-up.
func TestCheckInProgressRate(t *testing.T) {
	t.Parallel()
	const size = 16 << 20
	var out bytes.Buffer
	p := newProgressBar(&out, size, "x.bin")
	made := time.Now()
	buf := make([]byte, 8<<20)
	rand.Read(buf)
	sha256.Sum256(buf)
	gap := time.Since(made)
	p.progress(size / 2)
	p.progress(size)
	p.done(nil)
	rs := rates(t, out.String())
	if len(rs) == 0 {
		t.Fatalf("no rate printed:\n%q", out.String())
	}
	limit := float64(size) / gap.Seconds()
	for _, r := range rs {
		if r > limit*1.05 { // humanized to 2-3 digits
			t.Errorf("rate %.0f B/s is above %d bytes over the %v since the bar was made (%.0f B/s):\n%q", r, size, gap, limit, out.String())
		}
	}
	if !strings.Contains(out.String(), "100%") {
		t.Errorf("bar did not reach 100%%:\n%q", out.String())
	}
	if newCheckInProgress(&out, progressMin-1, "small") != nil {
		t.Error("a bar for a payload under 8 MiB")
	}
}

// TestSubmitProgress: submit shows its check-in bar only on a terminal
// (newCheckInProgress; the bar itself is TestCheckInProgressRate's), so a
// 9 MiB submit with standard error in a pipe or a log prints nothing but
// its job line, and a small one neither.
func TestSubmitProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	buf := make([]byte, 9<<20)
	rand.Read(buf)
	if err := os.WriteFile(big, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{big, filepath.Join(corpusPath, "bash.pdf")} {
		r := b.run("", "submit", "--kind", "blob", "--tenant", "acme", file)
		if r.code != 0 || strings.Contains(r.stderr, "check in") || strings.Contains(r.stderr, "%") {
			t.Fatalf("submit of %s off a terminal: exit %d, want 0 and no bar:\n%q", filepath.Base(file), r.code, r.stderr)
		}
	}
}

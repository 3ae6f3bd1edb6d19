package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/pdfinfo"
	"github.com/claimcheck/claimcheck/internal/testenv"
	_ "github.com/claimcheck/claimcheck/stores/gcsstore" // gs://, as -tags gcs compiles it in
)

// The tests run the command with gs:// compiled in, as -tags gcs builds it
// (stores_gcs.go), whatever the tags of the test build.
func init() { gcsCompiled = true }

// TestGCSNotCompiledIn: without the build tag gcs, --store gs://… is a
// usage error saying how to build it in.
func TestGCSNotCompiledIn(t *testing.T) {
	gcsCompiled = false
	defer func() { gcsCompiled = true }()
	r := setup(t).run("", "--store", "gs://bucket", "jobs")
	if r.code != 2 || !strings.Contains(r.stderr, "-tags gcs") {
		t.Errorf("gs:// without the tag: exit %d, stderr %q; want 2 naming -tags gcs", r.code, r.stderr)
	}
}

// corpusJob is one job of `run --json`, what does not depend on the store.
type corpusJob struct {
	File        string `json:"file"`
	Size        int64  `json:"size"`
	Inline      bool   `json:"inline"`
	TicketBytes int    `json:"ticket_bytes"`
	State       string `json:"state"`
	Attempts    int    `json:"attempts"`
	Pages       int    `json:"pages"`
	ID          int64  `json:"id"`
}

// runOn runs the main job on files with args (a --store) and returns its
// jobs by file name, each job's result, and the summary with its elapsed
// time zeroed.
func (b *cliBundle) runOn(files []string, args ...string) (map[string]corpusJob, map[string]pdfinfo.Info, runSummary) {
	b.t.Helper()
	var out struct {
		Jobs    []corpusJob `json:"jobs"`
		Summary runSummary  `json:"summary"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	all := append([]string{"--data", b.data}, append(append(args, "run", "--json"), files...)...)
	if code := Run(ctx, all, strings.NewReader(""), &stdout, &stderr); code != 0 {
		b.t.Fatalf("claimcheck %s: exit %d\n%s", strings.Join(all, " "), code, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		b.t.Fatal(err)
	}
	jobs, results := map[string]corpusJob{}, map[string]pdfinfo.Info{}
	for _, j := range out.Jobs {
		name := filepath.Base(j.File)
		var info pdfinfo.Info
		if err := json.Unmarshal([]byte(b.ok(append(args, "result", strconv.FormatInt(j.ID, 10))...)), &info); err != nil {
			b.t.Fatalf("result of %s: %v", name, err)
		}
		j.ID, j.File = 0, name
		jobs[name], results[name] = j, info
	}
	out.Summary.ElapsedSeconds = 0
	return jobs, results, out.Summary
}

// TestRunCorpusGCS: the main job with --store gs://… on fake-gcs-server
// gives the same jobs (placement, states, attempts, pages, ticket sizes
// within a few bytes), the same results and the same summary (bytes in the
// store and in the job database included) as the embedded default's file
// store. It runs on the documents the module ships, not big.pdf: 43 MiB
// twice more under the race detector would add minutes to this package
// (TestRunCorpus runs it on the embedded default; the full comparison,
// `claimcheck --store gs://… run testdata/pdf`, is a command to run by hand).
func TestRunCorpusGCS(t *testing.T) {
	gcsURL := testenv.Require(t, "CLAIMCHECK_TEST_GCS_URL", `scripts/fake-gcs.sh build && scripts/fake-gcs.sh start && eval "$(scripts/fake-gcs.sh env)"`)
	testenv.Require(t, "STORAGE_EMULATOR_HOST", `eval "$(scripts/fake-gcs.sh env)"`)
	t.Parallel()
	var files []string
	for _, name := range []string{"TeXShopAndAsymptote.pdf", "bash.pdf", "octave.pdf", "pixel.pdf", "refcard-a4.pdf"} {
		files = append(files, filepath.Join(corpusPath, name))
	}
	store := withParams(t, gcsURL, url.Values{"prefix": {"run" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"}})
	defJobs, defResults, defSum := setup(t).runOn(files)
	gsJobs, gsResults, gsSum := setup(t).runOn(files, "--store", store)
	if len(gsJobs) != len(defJobs) || len(defJobs) != len(files) {
		t.Fatalf("%d jobs on gs://, %d on the embedded default; want %d", len(gsJobs), len(defJobs), len(files))
	}
	// A ticket's size varies by a few bytes from run to run, whatever the
	// store: its created time drops trailing zeros of its nanoseconds, and
	// a sealed inline ticket's wrapped data key holds a random key id
	// (varint-encoded). Within ticketSlack bytes they are the same.
	const ticketSlack = 8
	near := func(a, b int) bool { return a-b <= ticketSlack && b-a <= ticketSlack }
	for name, d := range defJobs {
		g := gsJobs[name]
		if !near(g.TicketBytes, d.TicketBytes) {
			t.Errorf("%s: ticket of %d bytes on gs://, %d on the embedded default", name, g.TicketBytes, d.TicketBytes)
		}
		if g.TicketBytes = d.TicketBytes; g != d {
			t.Errorf("%s: gs:// %+v, embedded default %+v", name, g, d)
		}
		if g := gsResults[name]; !reflect.DeepEqual(g, defResults[name]) {
			t.Errorf("result of %s: gs:// %+v, embedded default %+v", name, g, defResults[name])
		}
		t.Logf("%s: %d bytes, inline %v, ticket %d B, %s after %d attempt(s), %d pages", name, d.Size, d.Inline, d.TicketBytes, d.State, d.Attempts, d.Pages)
	}
	for _, p := range [][2]*int{{&gsSum.TicketMinBytes, &defSum.TicketMinBytes}, {&gsSum.TicketMaxBytes, &defSum.TicketMaxBytes},
		{&gsSum.OffloadedMinBytes, &defSum.OffloadedMinBytes}, {&gsSum.OffloadedMaxBytes, &defSum.OffloadedMaxBytes},
		{&gsSum.InlineMinBytes, &defSum.InlineMinBytes}, {&gsSum.InlineMaxBytes, &defSum.InlineMaxBytes}} {
		if near(*p[0], *p[1]) {
			*p[0] = *p[1]
		}
	}
	// The job database holds the tickets: the same slack for each job.
	if d := gsSum.JobDatabaseBytes - defSum.JobDatabaseBytes; d <= ticketSlack*6 && d >= -ticketSlack*6 {
		gsSum.JobDatabaseBytes = defSum.JobDatabaseBytes
	}
	t.Logf("summary on gs://: %+v", gsSum)
	if gsSum != defSum {
		t.Errorf("summary on gs:// %+v\nembedded default %+v", gsSum, defSum)
	}
}

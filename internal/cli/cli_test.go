package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/bigpdf"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/internal/pdfinfo"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

const corpusPath = "../../testdata/pdf"

// ensureBigPDF makes corpus/big.pdf (43 MiB, 10,515 pages), which the
// module does not ship, unless it is there.
func ensureBigPDF(t *testing.T) { testenv.BigPDF(t, corpusPath) }

// cliBundle is one data directory and a way to run commands against it.
type cliBundle struct {
	t    *testing.T
	data string
}

func setup(t *testing.T) *cliBundle {
	t.Helper()
	return &cliBundle{t: t, data: filepath.Join(t.TempDir(), "data")}
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs claimcheck in-process with --data set to the bundle's directory,
// interrupted after 8 minutes (run on the corpus, big.pdf's 45 MB through
// pdfcpu under the race detector, took over 4 at load 16).
func (b *cliBundle) run(stdin string, args ...string) result {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Run(ctx, append([]string{"--data", b.data}, args...), strings.NewReader(stdin), &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

// dead runs a work command that must send jobs to the dead letters: it
// fails with exit 1 and names them.
func (b *cliBundle) dead(args ...string) string {
	b.t.Helper()
	r := b.run("", args...)
	if r.code != 1 || !strings.Contains(r.stderr, "went to the dead letters") {
		b.t.Fatalf("claimcheck %s: exit %d, want 1 naming dead letters\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// ok runs a command that must succeed.
func (b *cliBundle) ok(args ...string) string {
	b.t.Helper()
	r := b.run("", args...)
	if r.code != 0 {
		b.t.Fatalf("claimcheck %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

type jobJSON struct {
	ID          int64  `json:"id"`
	Kind        string `json:"kind"`
	Tenant      string `json:"tenant"`
	State       string `json:"state"`
	Attempts    int    `json:"attempts"`
	TicketBytes int    `json:"ticket_bytes"`
	Inline      bool   `json:"inline"`
	Reason      string `json:"reason"`
	Duplicate   bool   `json:"duplicate"`
}

func (b *cliBundle) jobs(args ...string) []jobJSON {
	b.t.Helper()
	var js []jobJSON
	out := b.ok(append([]string{"jobs", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		b.t.Fatalf("jobs --json output is not a JSON array: %v\n%s", err, out)
	}
	return js
}

func (b *cliBundle) submit(args ...string) jobJSON {
	b.t.Helper()
	var j jobJSON
	out := b.ok(append([]string{"submit", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		b.t.Fatalf("submit --json: %v\n%s", err, out)
	}
	if j.ID <= 0 {
		b.t.Fatalf("submit --json gave no id: %s", out)
	}
	return j
}

// objects lists the object files in the default file store (not the
// fileblob attribute sidecars nor the namespace marker), keyed by object key.
func (b *cliBundle) objects() map[string]string {
	b.t.Helper()
	root := filepath.Join(b.data, "objects")
	found := map[string]string{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, ".attrs") && d.Name() != claimcheck.NamespaceMarkerKey {
			rel, _ := filepath.Rel(root, p)
			found[filepath.ToSlash(rel)] = p
		}
		return nil
	})
	return found
}

// payloadKey is the object key of job id's payload, as the library named it
// on check-in (inspect --reveal shows the ticket's key): a sealed payload's
// content address carries its key's tag, so tests never build it by hand.
func (b *cliBundle) payloadKey(id int64, args ...string) string {
	b.t.Helper()
	var in struct {
		Payload struct {
			Key string `json:"key"`
		} `json:"payload"`
	}
	out := b.ok(append(args, "--json", "inspect", "--reveal", strconv.FormatInt(id, 10))...)
	if err := json.Unmarshal([]byte(out), &in); err != nil || in.Payload.Key == "" {
		b.t.Fatalf("inspect --reveal %d: no payload key (%v)\n%s", id, err, out)
	}
	return in.Payload.Key
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestRunCorpus is the main job on the documents shipped in testdata: every
// job completes, every offloaded ticket is within budget, the only inline
// payload is the one under 64 KiB, and result returns each document's JSON.
func TestRunCorpus(t *testing.T) {
	t.Parallel()
	ensureBigPDF(t)
	b := setup(t)
	var out struct {
		Jobs []struct {
			ID          int64  `json:"id"`
			File        string `json:"file"`
			Size        int64  `json:"size"`
			Inline      bool   `json:"inline"`
			TicketBytes int    `json:"ticket_bytes"`
			State       string `json:"state"`
			Attempts    int    `json:"attempts"`
			Pages       int    `json:"pages"`
		} `json:"jobs"`
		Summary runSummary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(b.ok("run", "--json", corpusPath)), &out); err != nil {
		t.Fatal(err)
	}
	wantPages := map[string]int{"TeXShopAndAsymptote.pdf": 2, "bash.pdf": 87, "big.pdf": bigpdf.Pages, "octave.pdf": 1158, "pixel.pdf": 1, "refcard-a4.pdf": 3}
	if len(out.Jobs) != len(wantPages) {
		t.Fatalf("run made %d jobs, want %d", len(out.Jobs), len(wantPages))
	}
	for _, j := range out.Jobs {
		name := filepath.Base(j.File)
		if j.State != "completed" || j.Attempts != 1 {
			t.Errorf("%s: state %s after %d attempts, want completed after 1", name, j.State, j.Attempts)
		}
		if want := name == "pixel.pdf"; j.Inline != want {
			t.Errorf("%s (%d bytes): inline=%t, want %t", name, j.Size, j.Inline, want)
		}
		if !j.Inline && j.TicketBytes > claimcheck.MaxTicketBytes {
			t.Errorf("%s: offloaded ticket is %d bytes, budget %d", name, j.TicketBytes, claimcheck.MaxTicketBytes)
		}
		if j.Pages != wantPages[name] {
			t.Errorf("%s: %d pages, want %d", name, j.Pages, wantPages[name])
		}
		var info pdfinfo.Info
		if err := json.Unmarshal([]byte(b.ok("result", strconv.FormatInt(j.ID, 10))), &info); err != nil {
			t.Fatalf("result %d is not JSON: %v", j.ID, err)
		}
		if info.PageCount != wantPages[name] || info.SHA256 != sha256File(t, j.File) || info.Bytes != j.Size {
			t.Errorf("result of %s: %+v", name, info)
		}
	}
	s := out.Summary
	if s.Done != 6 || s.Dead != 0 || s.Inline != 1 || s.Offloaded != 5 || s.OffloadedMaxBytes > claimcheck.MaxTicketBytes {
		t.Errorf("summary %+v", s)
	}
	if s.ObjectStoreBytes < 40<<20 || s.JobDatabaseBytes > 16<<10 {
		t.Errorf("object storage %d B, job database %d B: payloads must live in the store, tickets in the database", s.ObjectStoreBytes, s.JobDatabaseBytes)
	}

	// result -o writes the same bytes to a file.
	dst := filepath.Join(t.TempDir(), "r.json")
	b.ok("result", strconv.FormatInt(out.Jobs[0].ID, 10), "-o", dst)
	if got, _ := os.ReadFile(dst); !json.Valid(got) {
		t.Errorf("result -o wrote %q", got)
	}
}

// TestDeletedObjectIsDeadOnFirstAttempt: a payload deleted behind a queued
// job dead-letters it on attempt 1 with reason payload-missing.
func TestDeletedObjectIsDeadOnFirstAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.submit("--kind", "pdf-info", "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf"))
	objs := b.objects()
	if len(objs) != 1 {
		t.Fatalf("want 1 object after submit, have %v", objs)
	}
	for _, p := range objs {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	b.dead("work", "--kind", "pdf-info", "--until-empty")
	js := b.jobs("--state", "dead")
	if len(js) != 1 || js[0].ID != j.ID || js[0].State != "cancelled" || js[0].Attempts != 1 || js[0].Reason != claimcheck.ReasonPayloadMissing {
		t.Fatalf("dead jobs: %+v, want job %d cancelled on attempt 1 with reason %s", js, j.ID, claimcheck.ReasonPayloadMissing)
	}
	if out := b.ok("dead"); !strings.Contains(out, claimcheck.ReasonPayloadMissing) {
		t.Errorf("dead does not show the reason:\n%s", out)
	}
}

// TestFlippedByteIsCorruptAndHandlerNeverRuns: one flipped byte in a stored
// object dead-letters the job on attempt 1 as corrupt, and the --exec
// handler is never started.
func TestFlippedByteIsCorruptAndHandlerNeverRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.submit("--kind", "convert", "--tenant", "acme", filepath.Join(corpusPath, "refcard-a4.pdf"))
	for _, p := range b.objects() {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		raw[len(raw)/2] ^= 0x01
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(t.TempDir(), "handler-ran")
	b.dead("work", "--kind", "convert", "--until-empty", "--exec", "--", "sh", "-c", "touch "+marker+"; cat")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the handler ran on a corrupt payload")
	}
	js := b.jobs("--state", "dead")
	if len(js) != 1 || js[0].ID != j.ID || js[0].Attempts != 1 || js[0].Reason != claimcheck.ReasonPayloadCorrupt {
		t.Fatalf("dead jobs: %+v, want job %d dead on attempt 1 as %s", js, j.ID, claimcheck.ReasonPayloadCorrupt)
	}
}

// TestExecHandler: stdin is the verified payload, stdout the result; exit
// 65 dead-letters at once; any other failure is retried, then dead.
func TestExecHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := filepath.Join(corpusPath, "TeXShopAndAsymptote.pdf")
	good := b.submit("--kind", "count", "--tenant", "acme", in)
	b.ok("work", "--kind", "count", "--until-empty", "--exec", "--", "sh", "-c", "wc -c | tr -d ' '")
	if got := strings.TrimSpace(b.ok("result", strconv.FormatInt(good.ID, 10))); got != "80883" {
		t.Errorf("exec result %q, want the payload's byte count 80883", got)
	}

	bad := b.submit("--kind", "reject", "--tenant", "acme", in)
	b.dead("work", "--kind", "reject", "--until-empty", "--exec", "--", "sh", "-c", "cat >/dev/null; exit 65")
	flaky := b.submit("--max-attempts", "2", "--kind", "flaky", "--tenant", "acme", in)
	b.dead("work", "--kind", "flaky", "--until-empty", "--exec", "--", "sh", "-c", "cat >/dev/null; exit 3")
	dead := map[int64]jobJSON{}
	for _, j := range b.jobs("--state", "dead") {
		dead[j.ID] = j
	}
	if j := dead[bad.ID]; j.Attempts != 1 || j.Reason != claimcheck.ReasonHandler || j.State != "cancelled" {
		t.Errorf("exit 65: %+v, want cancelled on attempt 1, reason %s", j, claimcheck.ReasonHandler)
	}
	if j := dead[flaky.ID]; j.Attempts != 2 || j.Reason != claimcheck.ReasonTransient || j.State != "discarded" {
		t.Errorf("exit 3: %+v, want discarded after 2 attempts, reason %s", j, claimcheck.ReasonTransient)
	}

	// A dead letter can be replayed; the replayed job succeeds this time.
	b.ok("dead", "replay", strconv.FormatInt(flaky.ID, 10))
	b.ok("work", "--kind", "flaky", "--until-empty", "--exec", "--", "cat")
	for _, j := range b.jobs("--kind", "flaky") {
		if j.State != "completed" {
			t.Errorf("replayed job %d: %s", j.ID, j.State)
		}
	}
	if r := b.run("", "dead", "replay", strconv.FormatInt(good.ID, 10)); r.code == 0 || !strings.Contains(r.stderr, "not dead") {
		t.Errorf("replay of a completed job: exit %d, %s", r.code, r.stderr)
	}
}

// TestIdempotentSubmit: the same file twice with the same idempotency key
// makes one job and one object.
func TestIdempotentSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := filepath.Join(corpusPath, "bash.pdf")
	first := b.submit("--kind", "pdf-info", "--tenant", "acme", "--idempotency-key", "order-42", f)
	second := b.submit("--kind", "pdf-info", "--tenant", "acme", "--idempotency-key", "order-42", f)
	if second.ID != first.ID || !second.Duplicate || first.Duplicate {
		t.Fatalf("first %+v, second %+v: want the same job, the second marked duplicate", first, second)
	}
	if js := b.jobs(); len(js) != 1 {
		t.Errorf("%d jobs, want 1", len(js))
	}
	objs := b.objects()
	want := b.payloadKey(first.ID)
	if !strings.HasPrefix(want, "payloads/acme/"+sha256File(t, f)[:2]+"/"+sha256File(t, f)) {
		t.Errorf("the payload's key %s is not its content address", want)
	}
	if _, ok := objs[want]; len(objs) != 1 || !ok {
		t.Errorf("objects %v, want exactly %s", objs, want)
	}
}

// TestSaltedKeysDifferPerTenant: with a deployment secret, the same file
// under two tenants lands on two different keys, neither the plain digest.
func TestSaltedKeysDifferPerTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := filepath.Join(corpusPath, "bash.pdf")
	secret := strings.Repeat("ab", 32)
	b.ok("--secret", secret, "submit", "--kind", "pdf-info", "--tenant", "alpha", f)
	b.ok("--secret", secret, "submit", "--kind", "pdf-info", "--tenant", "beta", f)
	digest := sha256File(t, f)
	var names []string
	for k := range b.objects() {
		names = append(names, k)
		if strings.Contains(k, digest) {
			t.Errorf("salted key %s contains the plain sha256", k)
		}
	}
	if len(names) != 2 || filepath.Base(names[0]) == filepath.Base(names[1]) {
		t.Fatalf("objects %v: want two different keys", names)
	}
	// Both still claim and verify.
	b.ok("--secret", secret, "work", "--kind", "pdf-info", "--until-empty")
	for _, j := range b.jobs() {
		if j.State != "completed" {
			t.Errorf("job %d under a salted key: %s", j.ID, j.State)
		}
	}
	if r := b.run("", "--secret", "zz", "jobs"); r.code != 2 {
		t.Errorf("bad --secret: exit %d, want 2 (usage)", r.code)
	}
}

// TestBadInput: each bad input is a clear error, and what was stored before
// is still there afterwards.
func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	keep := b.submit("--kind", "pdf-info", "--tenant", "acme", filepath.Join(corpusPath, "octave.pdf"))
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pdf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	notFile := filepath.Join(dir, "file")
	if err := os.WriteFile(notFile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"missing file", "", []string{"submit", "--kind", "pdf-info", "--tenant", "acme", filepath.Join(dir, "nope.pdf")}, 2, "no such file"},
		{"directory as file", "", []string{"submit", "--kind", "pdf-info", "--tenant", "acme", dir}, 2, "not a regular file"},
		{"empty stdin", "", []string{"submit", "--kind", "pdf-info", "--tenant", "acme", "-"}, 2, "payload is empty"},
		{"empty file in run", "", []string{"run", empty}, 2, "is empty"},
		{"empty file to submit", "", []string{"submit", "--kind", "pdf-info", "--tenant", "acme", empty}, 2, "payload is empty"},
		{"--exec command's flag without --", "", []string{"work", "--kind", "x1", "--exec", "wc", "-c"}, 2, "put -- before the command"},
		{"run without arguments", "", []string{"run"}, 2, "needs files"},
		{"unknown kind to work", "", []string{"work", "--kind", "no-such-kind"}, 2, "no built-in handler"},
		{"invalid kind", "", []string{"submit", "--kind", "Bad Kind", "--tenant", "acme", "-"}, 2, "kind"},
		{"invalid tenant", "", []string{"submit", "--kind", "pdf-info", "--tenant", "../etc", "-"}, 2, "tenant"},
		{"no kind", "", []string{"submit", "--tenant", "acme", "-"}, 2, "--kind"},
		{"exec without command", "", []string{"work", "--kind", "x1", "--exec"}, 2, "needs a command"},
		{"bad job id", "", []string{"result", "abc"}, 2, "not a job id"},
		{"unknown job", "", []string{"inspect", "999"}, 1, "not found"},
		{"unknown state", "", []string{"jobs", "--state", "sleeping"}, 2, "unknown state"},
		{"zero attempts", "", []string{"--max-attempts", "0", "jobs"}, 2, "--max-attempts"},
		{"negative threshold", "", []string{"--inline-threshold", "-1", "jobs"}, 2, "--inline-threshold"},
		{"zero concurrency", "", []string{"work", "--kind", "pdf-info", "--concurrency", "0"}, 2, "--concurrency"},
		{"exec command missing", "", []string{"work", "--kind", "x1", "--exec", "--", "/no/such/command"}, 2, "cannot be run"},
		{"mem store across commands", "x", []string{"--store", "mem://", "submit", "--kind", "x1", "--tenant", "acme", "-"}, 2, "one process"},
		{"typo in data dir", "", []string{"--data", filepath.Join(dir, "typo"), "jobs"}, 1, "no claimcheck data"},
		{"keeper not compiled in", "", []string{"--keeper", "gcpkms://projects/p/k", "jobs"}, 2, "compiled in"},
		{"unknown command", "", []string{"frobnicate"}, 2, "unknown command"},
		{"serve address", "", []string{"serve", "--addr", "nonsense"}, 2, "host:port"},
		{"url ttl too long", "", []string{"url", "1", "--ttl", "8d"}, 2, "--ttl"},
		{"url ttl garbage", "", []string{"url", "1", "--ttl", "soon"}, 2, "--ttl"},
		{"no result yet", "", []string{"result", strconv.FormatInt(keep.ID, 10)}, 1, "no result"},
		{"too large", "0123456789", []string{"--max-payload-size", "4", "submit", "--kind", "x1", "--tenant", "acme", "-"}, 1, "payload exceeds"},
		{"data dir under a file", "", []string{"--data", filepath.Join(notFile, "sub"), "jobs"}, 1, "data directory"},
		{"unknown flag", "", []string{"jobs", "--frobnicate"}, 2, "unknown flag"},
	}
	for _, c := range cases {
		r := b.run(c.stdin, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, r.code, r.stderr, c.code, c.want)
		}
	}
	if js := b.jobs(); len(js) != 1 || js[0].ID != keep.ID || js[0].State != "available" {
		t.Fatalf("after bad input the jobs are %+v, want only job %d, still available", js, keep.ID)
	}
	if objs := b.objects(); len(objs) != 1 {
		t.Errorf("after bad input the store holds %d objects, want the 1 stored before", len(objs))
	}
	b.ok("work", "--kind", "pdf-info", "--until-empty")
	if js := b.jobs(); js[0].State != "completed" {
		t.Errorf("job stored before the bad input: %s, want completed", js[0].State)
	}
}

// TestUnwritableDataDirectory: a data directory that cannot be written is a
// clear error for a command that writes (skipped as root, whom permissions
// do not stop); TestReadOnlyDataDirectory: commands that only read work there.
func TestUnwritableDataDirectory(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("running as root: a 0555 directory is still writable; TestBadInput covers an unwritable path")
	}
	b := setup(t)
	if err := os.MkdirAll(b.data, 0o555); err != nil {
		t.Fatal(err)
	}
	r := b.run("", "work", "--kind", "pdf-info", "--until-empty")
	if r.code != 1 || !strings.Contains(r.stderr, "not writable") {
		t.Errorf("exit %d, %q", r.code, r.stderr)
	}
}

// TestInspectRedacts: inspect shows both halves without the full key.
func TestInspectRedacts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := filepath.Join(corpusPath, "bash.pdf")
	j := b.submit("--kind", "pdf-info", "--tenant", "acme", f)
	out := b.ok("inspect", strconv.FormatInt(j.ID, 10))
	digest := sha256File(t, f)
	if strings.Contains(out, digest) {
		t.Errorf("inspect printed the full digest/key:\n%s", out)
	}
	for _, want := range []string{"payloads/acme/…", digest[:12], "recorded-matches-ticket=true", "size=399798"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	var in inspection
	if err := json.Unmarshal([]byte(b.ok("inspect", "--json", strconv.FormatInt(j.ID, 10))), &in); err != nil {
		t.Fatal(err)
	}
	// Encrypted by default: the stored object is the ciphertext, a little
	// longer than the 399,798-byte plaintext.
	if in.Payload == nil || in.Payload.Object == nil || !in.Payload.Object.MatchesTicket || !in.Payload.Object.Encrypted || in.Payload.Object.Size <= 399798 {
		t.Errorf("inspect --json payload half: %+v", in.Payload)
	}
}

// TestRedaction runs jobs end to end, through success and every failure
// path, with a known marker in the payloads and in a named key, captures
// every line the commands print and log (--log-level debug) and every job's
// error records and metadata, and fails if either marker appears. The job
// arguments are not searched: they carry the ticket, whose key is the claim
// check itself.
func TestRedaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const payloadMarker = "PAYLOAD-MARKER-5d1c9e"
	const keyMarker = "KEYMARKER-a81f"
	dir := t.TempDir()
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		data := []byte(strings.Repeat(payloadMarker+" ", size/len(payloadMarker)+1))
		if err := os.WriteFile(p, data[:size], 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big, small := write("big.bin", 300<<10), write("small.bin", 2<<10)
	var all strings.Builder
	run := func(stdin string, args ...string) result {
		r := b.run(stdin, append([]string{"--log-level", "debug"}, args...)...)
		all.WriteString(r.stdout + r.stderr)
		return r
	}
	submit := func(kind string, extra ...string) int64 {
		r := run("", append([]string{"submit", "--json", "--kind", kind, "--tenant", "acme"}, extra...)...)
		var j jobJSON
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &j) != nil {
			t.Fatalf("submit %v: %d %s", extra, r.code, r.stderr)
		}
		return j.ID
	}
	ok := submit("echo", big)
	inline := submit("echo", small)
	named := submit("echo", "--name", "orders/"+keyMarker, big)
	missing := submit("gone", "--name", "gone/"+keyMarker, big)
	corrupt := submit("flip", "--name", "flip/"+keyMarker, big)
	rejected := submit("reject", small)
	// A key conflict (same name, other bytes) fails at check-in.
	if r := run("", "submit", "--kind", "echo", "--tenant", "acme", "--name", "orders/"+keyMarker, small); r.code == 0 {
		t.Fatal("a second payload under the same name was accepted")
	}
	for key, path := range b.objects() {
		switch {
		case strings.HasPrefix(key, "payloads/acme/named/gone/"):
			os.Remove(path)
		case strings.HasPrefix(key, "payloads/acme/named/flip/"):
			raw, _ := os.ReadFile(path)
			raw[len(raw)/2] ^= 0x20
			os.WriteFile(path, raw, 0o644)
		}
	}
	run("", "work", "--kind", "echo", "--until-empty", "--exec", "--", "cat")
	run("", "work", "--kind", "gone", "--until-empty", "--exec", "--", "cat")
	run("", "work", "--kind", "flip", "--until-empty", "--exec", "--", "cat")
	run("", "work", "--kind", "reject", "--until-empty", "--exec", "--", "sh", "-c", "cat >/dev/null; exit 65")
	for _, id := range []int64{ok, inline, named, missing, corrupt, rejected} {
		run("", "inspect", strconv.FormatInt(id, 10))
		run("", "inspect", "--json", strconv.FormatInt(id, 10))
	}
	run("", "jobs")
	run("", "jobs", "--json")
	run("", "dead")
	run("", "dead", "--json")
	run("", "dead", "replay", strconv.FormatInt(missing, 10))
	run("", "work", "--kind", "gone", "--until-empty", "--exec", "--", "cat")

	// The job records: every attempt's error and the metadata (outputs).
	db, err := sql.Open("sqlite", filepath.Join(b.data, "claimcheck.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT CAST(errors AS TEXT), CAST(metadata AS TEXT) FROM river_job`)
	if err != nil {
		t.Fatal(err)
	}
	var records int
	for rows.Next() {
		var errs, meta sql.NullString
		if err := rows.Scan(&errs, &meta); err != nil {
			t.Fatal(err)
		}
		all.WriteString(errs.String + meta.String)
		records++
	}
	rows.Close()

	text := all.String()
	for _, want := range []string{claimcheck.ReasonPayloadMissing, claimcheck.ReasonPayloadCorrupt, claimcheck.ReasonHandler, "key holds different bytes"} {
		if !strings.Contains(text, want) {
			t.Errorf("the captured output never mentions %s: the failure paths did not run", want)
		}
	}
	if records != 6 || !strings.Contains(text, "level=DEBUG") {
		t.Errorf("%d job records, debug logs captured: %t; want 6 and true", records, strings.Contains(text, "level=DEBUG"))
	}
	for _, marker := range []string{payloadMarker, keyMarker} {
		if i := strings.Index(text, marker); i >= 0 {
			t.Errorf("marker %s appears in output or job records: …%s…", marker, text[max(0, i-120):min(len(text), i+60)])
		}
	}
	// With --reveal the operator asks for the key explicitly, and gets it.
	if r := b.run("", "inspect", "--reveal", strconv.FormatInt(named, 10)); !strings.Contains(r.stdout, keyMarker) {
		t.Errorf("inspect --reveal does not show the full key:\n%s", r.stdout)
	}
}

// TestDeadLetterTools: dead lists age; replay --all requeues the dead
// letters whose payloads are readable and refuses the one whose payload is
// gone; purge deletes dead letters and their registry rows; inspect shows
// the object's age and what decides its expiry.
func TestDeadLetterTools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gone := b.submit("--kind", "reject", "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf"))
	kept := b.submit("--kind", "reject", "--tenant", "acme", filepath.Join(corpusPath, "refcard-a4.pdf"))
	inline := b.submit("--kind", "reject", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
	b.dead("work", "--kind", "reject", "--until-empty", "--exec", "--", "sh", "-c", "cat >/dev/null; exit 65")
	var in inspection
	if err := json.Unmarshal([]byte(b.ok("inspect", "--json", "--reveal", strconv.FormatInt(gone.ID, 10))), &in); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(b.data, "objects", filepath.FromSlash(in.Payload.Key))); err != nil {
		t.Fatal(err)
	}
	if out := b.ok("dead"); !strings.Contains(out, "AGE") || strings.Count(out, claimcheck.ReasonHandler) != 3 {
		t.Errorf("dead:\n%s", out)
	}
	out := b.ok("inspect", strconv.FormatInt(kept.ID, 10))
	if !strings.Contains(out, "age=") || !strings.Contains(out, "time-left-before-expiry=unknown (no lifecycle engine") {
		t.Errorf("inspect does not show age and expiry:\n%s", out)
	}

	r := b.run("", "dead", "replay", "--all", "--kind", "reject")
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("job %d refused: payload expired or deleted", gone.ID)) || !strings.Contains(r.stdout, "replayed 2 dead letters, refused 1") {
		t.Fatalf("dead replay --all: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b.ok("work", "--kind", "reject", "--until-empty", "--exec", "--", "cat")
	states := map[int64]string{}
	for _, j := range b.jobs() {
		states[j.ID] = j.State
	}
	if states[gone.ID] != "cancelled" || states[kept.ID] != "completed" || states[inline.ID] != "completed" {
		t.Fatalf("after replay --all: %v", states)
	}
	if r := b.run("", "dead", "replay", strconv.FormatInt(gone.ID, 10)); r.code != 1 || !strings.Contains(r.stderr, "nothing to replay") {
		t.Errorf("replay of the expired dead letter: exit %d %s", r.code, r.stderr)
	}

	if out := b.ok("dead", "purge", "--dry-run"); !strings.Contains(out, fmt.Sprintf("would purge 1 dead letters [%d]", gone.ID)) {
		t.Errorf("purge --dry-run: %s", out)
	}
	if out := b.ok("dead", "purge", "--older-than", "1d"); !strings.Contains(out, "purged 0") {
		t.Errorf("purge of letters dead for over a day: %s", out)
	}
	if out := b.ok("dead", "purge"); !strings.Contains(out, "purged 1") {
		t.Errorf("purge: %s", out)
	}
	if js := b.jobs(); len(js) != 2 {
		t.Errorf("after purge %d jobs, want 2", len(js))
	}
	db, err := sql.Open("sqlite", filepath.Join(b.data, "claimcheck.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow(`SELECT COUNT(*) FROM claimcheck_claim WHERE job_id = $1`, gone.ID).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("registry rows of the purged job: %d (%v), want 0", rows, err)
	}
}

// eachJobDatabase runs fn in parallel subtests, SQLite and PostgreSQL,
// each with a fresh bundle and the global flags that select its job
// database: none for SQLite (the data directory's), --database for a
// PostgreSQL database of its own (CLAIMCHECK_TEST_DATABASE_URL; required
// when CI is set).
func eachJobDatabase(t *testing.T, fn func(t *testing.T, b *cliBundle, database []string)) {
	t.Helper()
	for _, db := range []struct {
		name     string
		database func(t *testing.T) []string
	}{
		{"SQLite", func(*testing.T) []string { return nil }},
		{"PostgreSQL", func(t *testing.T) []string {
			testenv.Require(t, dbtest.EnvPostgresURL, "a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/claimcheck_test?sslmode=disable")
			return []string{"--database", dbtest.Postgres(t)}
		}},
	} {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t), db.database(t))
		})
	}
}

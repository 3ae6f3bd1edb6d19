package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/internal/outageproxy"
	"github.com/claimcheck/claimcheck/internal/pdfinfo"
)

// brokerCase is a real broker the command's tests run against.
type brokerCase struct {
	name string
	url  func(t *testing.T) string // a fresh queue or stream on it
}

// brokers are RabbitMQ and NATS JetStream; each skips when its
// CLAIMCHECK_TEST_*_URL is unset.
var brokers = []brokerCase{
	{"RabbitMQ", func(t *testing.T) string {
		u := brokertest.ServerURL(t, "CLAIMCHECK_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
		u = strings.TrimSuffix(u, "/") + fmt.Sprintf("/?queue=cctest.cli.%d", time.Now().UnixNano())
		t.Cleanup(func() { dropTopology(t, u) })
		return u
	}},
	{"JetStream", func(t *testing.T) string {
		u := brokertest.ServerURL(t, "CLAIMCHECK_TEST_NATS_URL", "nats://127.0.0.1:4222")
		n := time.Now().UnixNano()
		u = strings.TrimSuffix(u, "/") + fmt.Sprintf("?stream=CCTEST_CLI_%d&subject=cctest.cli.%d&consumer=cli", n, n)
		t.Cleanup(func() { dropTopology(t, u) })
		return u
	}},
}

// dropTopology deletes the queues or streams a test made.
func dropTopology(t *testing.T, u string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := broker.DeleteTopology(ctx, u); err != nil {
		t.Logf("cleanup: %v", err)
	}
}

// TestRunBroker: the main job through RabbitMQ and through JetStream gives
// the job pipeline's results: every document completed on attempt 1, the
// same page counts, results whose digest is the file's, tickets within
// budget.
func TestRunBroker(t *testing.T) {
	t.Parallel()
	files := []string{"TeXShopAndAsymptote.pdf", "bash.pdf", "octave.pdf", "pixel.pdf", "refcard-a4.pdf"}
	wantPages := map[string]int{"TeXShopAndAsymptote.pdf": 2, "bash.pdf": 87, "octave.pdf": 1158, "pixel.pdf": 1, "refcard-a4.pdf": 3}
	for _, bc := range brokers {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			u := bc.url(t)
			b := setup(t)
			args := []string{"--broker", u, "run", "--json"}
			for _, f := range files {
				args = append(args, filepath.Join(corpusPath, f))
			}
			var out struct {
				Jobs []struct {
					ID          int64  `json:"id"`
					File        string `json:"file"`
					Size        int64  `json:"size"`
					TicketBytes int    `json:"ticket_bytes"`
					Inline      bool   `json:"inline"`
					State       string `json:"state"`
					Attempts    int    `json:"attempts"`
					Pages       int    `json:"pages"`
				} `json:"jobs"`
				Summary runSummary `json:"summary"`
			}
			if err := json.Unmarshal([]byte(b.ok(args...)), &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Jobs) != len(files) || out.Summary.Done != len(files) || out.Summary.Dead != 0 {
				t.Fatalf("jobs %+v summary %+v", out.Jobs, out.Summary)
			}
			if listed := b.jobs("--kind", pdfinfo.Kind); len(listed) != len(files) {
				t.Fatalf("jobs --kind %s lists %d jobs, want %d", pdfinfo.Kind, len(listed), len(files))
			}
			for _, j := range out.Jobs {
				name := filepath.Base(j.File)
				if j.State != "completed" || j.Attempts != 1 || j.Pages != wantPages[name] || (!j.Inline && j.TicketBytes > 512) {
					t.Errorf("%s: %+v, want completed on attempt 1 with %d pages", name, j, wantPages[name])
				}
				var info pdfinfo.Info
				if err := json.Unmarshal([]byte(b.ok("result", strconv.FormatInt(j.ID, 10))), &info); err != nil {
					t.Fatalf("result %d: %v", j.ID, err)
				}
				if info.PageCount != wantPages[name] || info.SHA256 != sha256File(t, j.File) || info.Bytes != j.Size {
					t.Errorf("result of %s: %+v", name, info)
				}
			}
		})
	}
}

// TestBrokerMissingPayloadDeadOnFirstAttempt: submit through the outbox,
// delete one payload's object, work the broker: that message reaches the
// broker's dead-letter destination on attempt 1 with reason
// payload-missing, and the other completes.
func TestBrokerMissingPayloadDeadOnFirstAttempt(t *testing.T) {
	t.Parallel()
	for _, bc := range brokers {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			u := bc.url(t)
			b := setup(t)
			gone := b.submit("--broker", u, "--kind", pdfinfo.Kind, "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf"))
			kept := b.submit("--broker", u, "--kind", pdfinfo.Kind, "--tenant", "acme", filepath.Join(corpusPath, "refcard-a4.pdf"))
			goneKey := b.payloadKey(gone.ID)
			removed := 0
			for key, path := range b.objects() {
				if key == goneKey {
					if err := os.Remove(path); err != nil {
						t.Fatal(err)
					}
					removed++
				}
			}
			if removed != 1 {
				t.Fatalf("removed %d objects of bash.pdf, want 1 (objects %v)", removed, b.objects())
			}
			r := b.run("", "--broker", u, "work", "--kind", pdfinfo.Kind, "--until-empty", "--idle", "1s")
			if r.code != 1 || !strings.Contains(r.stderr, "payload-missing") || !strings.Contains(r.stdout, "succeeded 1") || !strings.Contains(r.stdout, "dead-lettered 1") {
				t.Fatalf("work: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			tr, err := broker.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			ds, err := tr.(broker.DeadLetterReader).ReceiveDead(ctx, 10)
			if err != nil || len(ds) != 1 {
				t.Fatalf("dead letters: %d, %v", len(ds), err)
			}
			d := ds[0]
			if d.Attributes[broker.AttrReason] != "payload-missing" || d.Attributes[broker.AttrJob] != strconv.FormatInt(gone.ID, 10) {
				t.Fatalf("dead letter attributes %v, want reason payload-missing for job %d", d.Attributes, gone.ID)
			}
			if err := tr.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
			// The broker's dead letter shows in jobs and dead, with its reason.
			for _, j := range b.jobs() {
				want := map[int64]string{gone.ID: "dead", kept.ID: "completed"}[j.ID]
				if j.State != want || (want == "dead" && j.Reason != "payload-missing") {
					t.Errorf("job %d: state %s reason %q, want %s", j.ID, j.State, j.Reason, want)
				}
			}
			if out := b.ok("dead"); !strings.Contains(out, "payload-missing") {
				t.Errorf("dead does not list the broker's dead letter:\n%s", out)
			}
			var info pdfinfo.Info
			if err := json.Unmarshal([]byte(b.ok("result", strconv.FormatInt(kept.ID, 10))), &info); err != nil || info.PageCount != 3 {
				t.Fatalf("result of the kept job: %+v %v", info, err)
			}
		})
	}
}

// TestWorkAWSPointer: a message built as the AWS extended client builds it
// (pointer body naming an object the Java client uploaded under a UUID key,
// ExtendedPayloadSize marker, no claimcheck attribute) is claimed by
// work --broker --pointer-bucket --adopt-tenant, through a real broker.
func TestWorkAWSPointer(t *testing.T) {
	t.Parallel()
	for _, bc := range brokers {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			u := bc.url(t)
			b := setup(t)
			b.ok("migrate") // creates the data directory and its file store
			pdf, err := os.ReadFile(filepath.Join(corpusPath, "refcard-a4.pdf"))
			if err != nil {
				t.Fatal(err)
			}
			const key = "3f9b7a52-1c4e-4d7a-9b0e-6a1f2c3d4e5f"
			if err := os.MkdirAll(filepath.Join(b.data, "objects"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(b.data, "objects", key), pdf, 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			tr, err := broker.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			body := `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"java-bucket","s3Key":"` + key + `"}]`
			err = tr.Publish(ctx, []broker.Message{{Body: []byte(body), Attributes: map[string]string{broker.AttrPayloadSize: strconv.Itoa(len(pdf))}}})
			tr.Close()
			if err != nil {
				t.Fatal(err)
			}
			// Without adoption the pointer cannot be verified: dead on attempt 1.
			r := b.run("", "--broker", u, "work", "--kind", pdfinfo.Kind, "--until-empty", "--idle", "1s", "--pointer-bucket", "java-bucket")
			if r.code != 1 || !strings.Contains(r.stderr, "carries no digest") || !strings.Contains(r.stdout, "dead-lettered 1") {
				t.Fatalf("work without --adopt-tenant: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			// Published again, it is adopted and worked.
			tr, err = broker.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			err = tr.Publish(ctx, []broker.Message{{Body: []byte(body), Attributes: map[string]string{broker.AttrPayloadSize: strconv.Itoa(len(pdf))}}})
			tr.Close()
			if err != nil {
				t.Fatal(err)
			}
			r = b.run("", "--broker", u, "work", "--kind", pdfinfo.Kind, "--until-empty", "--idle", "1s", "--pointer-bucket", "java-bucket", "--adopt-tenant", "java")
			if r.code != 0 || !strings.Contains(r.stdout, "succeeded 1") {
				t.Fatalf("work --adopt-tenant: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			// Adoption checks the payload in under claimcheck's key and
			// leaves the original: two objects. With --delete-on-ack the
			// original goes once the message is processed (as the AWS
			// consumers delete it), and claimcheck's copy with its last
			// reference: nothing is kept twice, nothing left behind.
			adopted := b.objects()
			if _, ok := adopted[key]; !ok || len(adopted) != 2 {
				t.Fatalf("after adoption without --delete-on-ack: %v, want the original and claimcheck's copy", slices.Sorted(maps.Keys(adopted)))
			}
			t.Logf("adopted without --delete-on-ack: %d objects: %v", len(adopted), slices.Sorted(maps.Keys(adopted)))
			tr, err = broker.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			err = tr.Publish(ctx, []broker.Message{{Body: []byte(body), Attributes: map[string]string{broker.AttrPayloadSize: strconv.Itoa(len(pdf))}}})
			tr.Close()
			if err != nil {
				t.Fatal(err)
			}
			r = b.run("", "--broker", u, "work", "--kind", pdfinfo.Kind, "--until-empty", "--idle", "1s", "--pointer-bucket", "java-bucket", "--adopt-tenant", "java", "--delete-on-ack")
			if r.code != 0 || !strings.Contains(r.stdout, "succeeded 1") {
				t.Fatalf("work --adopt-tenant --delete-on-ack: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			after := b.objects()
			if _, ok := after[key]; ok {
				t.Fatalf("with --delete-on-ack the adopted original is still there: %v", slices.Sorted(maps.Keys(after)))
			}
			t.Logf("adopted with --delete-on-ack: %d objects: %v", len(after), slices.Sorted(maps.Keys(after)))
		})
	}
}

// TestWorkDeleteOnAck: with --delete-on-ack the payload's object is gone
// once its message is acknowledged; without it, it stays.
func TestWorkDeleteOnAck(t *testing.T) {
	t.Parallel()
	bc := brokers[0]
	u := bc.url(t)
	b := setup(t)
	first := b.submit("--broker", u, "--kind", pdfinfo.Kind, "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf"))
	firstKey := b.payloadKey(first.ID)
	b.ok("--broker", u, "work", "--kind", pdfinfo.Kind, "--until-empty", "--idle", "1s")
	if _, ok := b.objects()[firstKey]; !ok {
		t.Fatalf("without --delete-on-ack the payload must stay: %v", b.objects())
	}
	second := b.submit("--broker", u, "--kind", pdfinfo.Kind, "--tenant", "acme", filepath.Join(corpusPath, "refcard-a4.pdf"))
	secondKey := b.payloadKey(second.ID)
	b.ok("--broker", u, "work", "--kind", pdfinfo.Kind, "--until-empty", "--idle", "1s", "--delete-on-ack")
	if _, ok := b.objects()[secondKey]; ok {
		t.Fatalf("with --delete-on-ack the payload %s is still there", secondKey)
	}
	if _, ok := b.objects()[firstKey]; !ok {
		t.Fatalf("the first job's payload went too: %v", b.objects())
	}
}

// TestBrokerBadInput: a wrong --broker URL is refused before anything is
// stored (exit 2); an unreachable broker keeps the job in the outbox
// (exit 0), and relay sends it later; broker-only flags without --broker
// are usage errors.
func TestBrokerBadInput(t *testing.T) {
	t.Parallel()
	u := brokers[0].url(t)
	b := setup(t)
	file := filepath.Join(corpusPath, "pixel.pdf")
	for _, bad := range []string{"kafka://127.0.0.1:9092/?topic=x", "amqp://guest:guest@127.0.0.1:5672/", strings.Replace(u, "?queue=", "?bogus=1&queue=", 1), "not a url"} {
		r := b.run("", "--broker", bad, "submit", "--kind", pdfinfo.Kind, "--tenant", "acme", file)
		if r.code != 2 || strings.Contains(r.stderr, "guest:guest") {
			t.Errorf("submit --broker %q: exit %d, want 2 without the password\nstderr: %s", bad, r.code, r.stderr)
		}
	}
	// A refusal creates nothing: no data directory, so no job database,
	// no key and no stored object.
	if _, err := os.Stat(b.data); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused submit left the data directory %s (stat: %v), objects %v", b.data, err, b.objects())
	}
	// The broker is down (its proxy cut): the job waits in the outbox,
	// bound to that broker, and goes out once it is back.
	proxy := outageproxy.New(t, "127.0.0.1:5672")
	down := strings.Replace(u, "127.0.0.1:5672", proxy.Addr(), 1)
	proxy.Cut()
	r := b.run("", "--broker", down, "submit", "--kind", pdfinfo.Kind, "--tenant", "acme", file)
	if r.code != 0 || !strings.Contains(r.stderr, "kept in the outbox") {
		t.Fatalf("submit to a broker that is down: exit %d\nstderr: %s", r.code, r.stderr)
	}
	if jobs := b.jobs(); len(jobs) != 1 || jobs[0].State != "available" {
		t.Fatalf("outbox after the failed relay: %+v", jobs)
	}
	proxy.Restore()
	if out := b.ok("--broker", down, "relay", "--until-empty"); !strings.Contains(out, "1 sent") {
		t.Fatalf("relay: %s", out)
	}
	if jobs := b.jobs(); len(jobs) != 1 || jobs[0].State != "sent" {
		t.Fatalf("after relay: %+v, want state sent", jobs)
	}
	for _, args := range [][]string{
		{"--destination", "other", "submit", "--kind", pdfinfo.Kind, "--tenant", "acme", file},
		{"work", "--kind", pdfinfo.Kind, "--idle", "1s"},
		{"work", "--kind", pdfinfo.Kind, "--delete-on-ack"},
		{"--broker", u, "--destination", "Bad Name", "relay"},
	} {
		if r := b.run("", args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2\nstderr: %s", args, r.code, r.stderr)
		}
	}
}

// TestWorkUntilEmptyLetsHandlersFinish: --until-empty with an --idle
// shorter than the handler stops receiving but lets the running handler
// finish: one attempt, succeeded, nothing retried.
func TestWorkUntilEmptyLetsHandlersFinish(t *testing.T) {
	t.Parallel()
	u := brokers[0].url(t)
	b := setup(t)
	b.submit("--broker", u, "--kind", "slow", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
	r := b.run("", "--broker", u, "work", "--kind", "slow", "--until-empty", "--idle", "500ms", "--exec", "--", "sh", "-c", "sleep 3; wc -c")
	if r.code != 0 || !strings.Contains(r.stdout, "succeeded 1, retried 0") {
		t.Fatalf("work: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// TestBrokerMaxAttemptsFromSubmit: the producer's --max-attempts travels
// with the message; a handler that always fails transiently is
// dead-lettered after that many attempts, not the worker's default.
func TestBrokerMaxAttemptsFromSubmit(t *testing.T) {
	t.Parallel()
	u := brokers[0].url(t)
	b := setup(t)
	j := b.submit("--broker", u, "--max-attempts", "2", "--kind", "flaky", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
	r := b.run("", "--broker", u, "work", "--kind", "flaky", "--until-empty", "--idle", "3s", "--exec", "--", "sh", "-c", "exit 1")
	if r.code != 1 || !strings.Contains(r.stdout, "retried 1, dead-lettered 1") {
		t.Fatalf("work: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, got := range b.jobs() {
		if got.ID == j.ID && (got.State != "dead" || got.Attempts != 2) {
			t.Fatalf("job %d: %+v, want dead after 2 attempts", j.ID, got)
		}
	}
}

// TestWorkInterruptDrains: an interrupt (the context cancelled, as Ctrl-C
// does) stops receiving but lets the running handler finish: its attempt
// succeeds instead of being killed and retried.
func TestWorkInterruptDrains(t *testing.T) {
	t.Parallel()
	u := brokers[0].url(t)
	b := setup(t)
	b.submit("--broker", u, "--kind", "slow", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(1500*time.Millisecond, cancel)
	var out, errOut strings.Builder
	code := Run(ctx, []string{"--data", b.data, "--broker", u, "work", "--kind", "slow", "--exec", "--", "sh", "-c", "sleep 3; wc -c"}, strings.NewReader(""), &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "succeeded 1, retried 0") || !strings.Contains(errOut.String(), "stopping: taking no more messages") {
		t.Fatalf("work: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
}

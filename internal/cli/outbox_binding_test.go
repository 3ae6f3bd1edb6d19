package cli

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck/internal/outageproxy"
	"github.com/claimcheck/claimcheck/internal/pdfinfo"
)

// TestOutboxEntryBoundToItsBroker (issue 12, must-show 6): an entry
// submitted for a RabbitMQ that cannot be reached stays in the outbox; a
// relay for NATS leaves it, says so and publishes nothing; a submit for
// NATS to the same destination is refused (exit 2) with nothing stored;
// once RabbitMQ is reachable, its relay publishes the entry and a
// RabbitMQ worker completes it.
func TestOutboxEntryBoundToItsBroker(t *testing.T) {
	t.Parallel()
	rabbit, err := url.Parse(brokers[0].url(t))
	if err != nil {
		t.Fatal(err)
	}
	nats := brokers[1].url(t)
	proxy := outageproxy.New(t, rabbit.Host)
	rabbit.Host = proxy.Addr()
	via := rabbit.String()
	proxy.Cut()

	b := setup(t)
	f := filepath.Join(corpusPath, "pixel.pdf")
	r := b.run("", "--broker", via, "submit", "--kind", pdfinfo.Kind, "--tenant", "acme", f)
	if r.code != 0 || !strings.Contains(r.stderr, "kept in the outbox") {
		t.Fatalf("submit to an unreachable RabbitMQ: exit %d, want 0 with the entry kept in the outbox\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	bound := "amqp://" + proxy.Addr() + "/?queue="
	r = b.run("", "--broker", nats, "relay", "--until-empty")
	if r.code != 0 || !strings.Contains(r.stdout, "0 sent") || !strings.Contains(r.stderr, "bound to broker "+bound) || !strings.Contains(r.stderr, "left in the outbox") {
		t.Fatalf("relay for NATS: exit %d, want 0 sending nothing and saying the entry is RabbitMQ's\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "guest") {
		t.Errorf("the relay's message names credentials:\n%s", r.stderr)
	}
	r = b.run("", "--broker", nats, "work", "--kind", pdfinfo.Kind, "--until-empty", "--idle", "1s", "--no-relay")
	if r.code != 0 || !strings.Contains(r.stdout, "succeeded 0") {
		t.Fatalf("a NATS worker found something: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = b.run("", "--broker", nats, "submit", "--kind", pdfinfo.Kind, "--tenant", "acme", filepath.Join(corpusPath, "bash.pdf"))
	if r.code != 2 || !strings.Contains(r.stderr, `destination "default" is bound to broker `+bound) || !strings.Contains(r.stderr, "nothing was stored") {
		t.Fatalf("submit for NATS to RabbitMQ's destination: exit %d, want 2 naming the binding\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if js := b.jobs(); len(js) != 1 || js[0].State == "completed" {
		t.Fatalf("jobs after the refused submit: %+v, want RabbitMQ's entry only, pending", js)
	}
	if n := len(b.objects()); n != 0 {
		t.Fatalf("%d objects stored, want none (pixel.pdf is inline, bash.pdf refused)", n)
	}

	proxy.Restore()
	r = b.run("", "--broker", via, "relay", "--until-empty")
	if r.code != 0 || !strings.Contains(r.stdout, "1 sent") {
		t.Fatalf("relay for RabbitMQ: exit %d, want 1 sent\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = b.run("", "--broker", via, "work", "--kind", pdfinfo.Kind, "--until-empty", "--idle", "1s")
	if r.code != 0 || !strings.Contains(r.stdout, "succeeded 1") {
		t.Fatalf("RabbitMQ worker: exit %d, want the entry worked\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

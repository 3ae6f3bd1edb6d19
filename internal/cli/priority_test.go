package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrokerPriority: through RabbitMQ with max_priority=4, a job submitted
// with --priority 1 after 50 with --priority 4 is worked first; jobs lists
// each job's priority.
func TestBrokerPriority(t *testing.T) {
	t.Parallel()
	u := brokers[0].url(t) + "&max_priority=4"
	t.Cleanup(func() { dropTopology(t, u) }) // before the plain URL's cleanup, which could not open it
	b := setup(t)
	for i := range 50 {
		r := b.run(fmt.Sprintf("routine %d\n", i), "--broker", u, "submit", "--json", "--kind", "labels", "--tenant", "acme", "--priority", "4", "-")
		if r.code != 0 {
			t.Fatalf("submit %d: exit %d: %s", i, r.code, r.stderr)
		}
	}
	r := b.run("urgent\n", "--broker", u, "submit", "--json", "--kind", "labels", "--tenant", "acme", "--priority", "1", "-")
	if r.code != 0 {
		t.Fatalf("submit urgent: exit %d: %s", r.code, r.stderr)
	}
	var urgent submitted
	if err := json.Unmarshal([]byte(r.stdout), &urgent); err != nil || urgent.Priority != 1 {
		t.Fatalf("submit --json: %v %s", err, r.stdout)
	}
	order := filepath.Join(t.TempDir(), "order")
	b.ok("--broker", u, "work", "--kind", "labels", "--concurrency", "1", "--until-empty", "--idle", "10s", "--exec", "--", "sh", "-c", "cat >> "+order)
	data, err := os.ReadFile(order)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 51 || lines[0] != "urgent" {
		t.Fatalf("worked %d jobs, first %q; want 51, the priority-1 job first", len(lines), lines[0])
	}
	var js []struct {
		ID       int64 `json:"id"`
		Priority int   `json:"priority"`
	}
	if err := json.Unmarshal([]byte(b.ok("jobs", "--json")), &js); err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if want := map[bool]int{true: 1, false: 4}[j.ID == urgent.ID]; j.Priority != want {
			t.Fatalf("jobs lists job %d with priority %d, want %d", j.ID, j.Priority, want)
		}
	}
	if out := b.ok("jobs"); !strings.Contains(out, "PRIORITY") {
		t.Fatalf("jobs table has no PRIORITY column:\n%s", out)
	}
}

// TestBrokerPriorityRefused: brokers without message priorities (JetStream,
// a RabbitMQ queue without max_priority) refuse --priority with exit 2 and
// store nothing; the job database's queue rejects a priority out of range.
func TestBrokerPriorityRefused(t *testing.T) {
	t.Parallel()
	for _, bc := range brokers {
		t.Run(bc.name, func(t *testing.T) {
			u := bc.url(t)
			b := setup(t)
			r := b.run("x", "--broker", u, "submit", "--kind", "labels", "--tenant", "acme", "--priority", "2", "-")
			if r.code != 2 || !strings.Contains(r.stderr, "no message priorities") || !strings.Contains(r.stderr, "nothing was stored") {
				t.Fatalf("submit --priority 2: exit %d, want 2 saying the broker has no priorities\n%s", r.code, r.stderr)
			}
			t.Logf("%s: %s", bc.name, strings.TrimSpace(r.stderr))
			if objs := b.objects(); len(objs) != 0 {
				t.Fatalf("%d objects stored by a refused submit", len(objs))
			}
		})
	}
	b := setup(t)
	for _, p := range []string{"0", "5", "-1"} {
		if r := b.run("x", "submit", "--kind", "labels", "--tenant", "acme", "--priority", p, "-"); r.code != 2 || !strings.Contains(r.stderr, "--priority") {
			t.Fatalf("submit --priority %s: exit %d\n%s", p, r.code, r.stderr)
		}
	}
}

// TestPriorityJobDatabase (issue 16, must-show 1, on the job database):
// on SQLite and on PostgreSQL, a job submitted with --priority 1 after 50
// with --priority 4 is worked first by a single worker.
func TestPriorityJobDatabase(t *testing.T) {
	t.Parallel()
	eachJobDatabase(t, func(t *testing.T, b *cliBundle, global []string) {
		for i := range 50 {
			r := b.run(fmt.Sprintf("routine %d\n", i), append(global, "submit", "--kind", "labels", "--tenant", "acme", "--priority", "4", "-")...)
			if r.code != 0 {
				t.Fatalf("submit %d: exit %d: %s", i, r.code, r.stderr)
			}
		}
		if r := b.run("urgent\n", append(global, "submit", "--kind", "labels", "--tenant", "acme", "--priority", "1", "-")...); r.code != 0 {
			t.Fatalf("submit urgent: exit %d: %s", r.code, r.stderr)
		}
		order := filepath.Join(t.TempDir(), "order")
		b.ok(append(global, "work", "--kind", "labels", "--concurrency", "1", "--until-empty", "--exec", "--", "sh", "-c", "cat >> "+order)...)
		data, err := os.ReadFile(order)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 51 || lines[0] != "urgent" || lines[1] != "routine 0" {
			t.Fatalf("worked %d jobs, first %q then %q; want 51, the priority-1 job first, then the oldest priority-4 one", len(lines), lines[0], lines[min(1, len(lines)-1)])
		}
		t.Logf("%s: 51 jobs worked, first %q, second %q, last %q", t.Name(), lines[0], lines[1], lines[50])
	})
}

// TestBrokerPriorityRefusedSQS: SQS (fauxqs) has no message priorities:
// submit --priority is refused with exit 2 and nothing stored, as on
// JetStream (TestBrokerPriorityRefused; docs/brokers.md, "Priorities").
// Not parallel: fauxqsBroker sets the AWS variables.
func TestBrokerPriorityRefusedSQS(t *testing.T) {
	u := fauxqsBroker(t)
	b := setup(t)
	r := b.run("x", "--broker", u, "submit", "--kind", "labels", "--tenant", "acme", "--priority", "2", "-")
	if r.code != 2 || !strings.Contains(r.stderr, "no message priorities") || !strings.Contains(r.stderr, "nothing was stored") {
		t.Fatalf("submit --priority 2 on SQS: exit %d, want 2 saying the broker has no priorities\n%s", r.code, r.stderr)
	}
	t.Logf("SQS: %s", strings.TrimSpace(r.stderr))
	if objs := b.objects(); len(objs) != 0 {
		t.Fatalf("%d objects stored by a refused submit", len(objs))
	}
	// Without --priority the same submit goes through.
	if r := b.run("x", "--broker", u, "submit", "--kind", "labels", "--tenant", "acme", "-"); r.code != 0 {
		t.Fatalf("submit without --priority on SQS: exit %d\n%s", r.code, r.stderr)
	}
}

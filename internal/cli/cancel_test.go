package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCancel: cancel turns a waiting job into a dead letter (reason
// cancelled) that dead replay sends back; a second cancel is refused (job
// already finished), and a bad id is a usage error.
func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(in, []byte("cancel me"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := b.submit("--kind", "later", "--tenant", "acme", in)
	id := strconv.FormatInt(j.ID, 10)

	var got jobJSON
	if err := json.Unmarshal([]byte(b.ok("--json", "cancel", id)), &got); err != nil || got.ID != j.ID || got.State != "cancelled" {
		t.Fatalf("cancel --json: %+v (%v), want job %d cancelled", got, err, j.ID)
	}
	dead := b.jobs("--state", "dead")
	if len(dead) != 1 || dead[0].ID != j.ID || dead[0].Reason != "cancelled" {
		t.Fatalf("dead letters after the cancel: %+v, want job %d, reason cancelled", dead, j.ID)
	}
	if r := b.run("", "cancel", id); r.code != 1 || !strings.Contains(r.stderr, "finished") {
		t.Fatalf("second cancel: exit %d, stderr %q; want 1, job already finished", r.code, r.stderr)
	}
	if r := b.run("", "cancel", "x"); r.code != 2 {
		t.Fatalf("cancel x: exit %d, want 2 (usage)", r.code)
	}
	b.ok("dead", "replay", id)
	if js := b.jobs("--state", "available"); len(js) != 1 || js[0].ID != j.ID {
		t.Fatalf("available jobs after the replay: %+v, want job %d", js, j.ID)
	}
	if out := b.ok("cancel", id); !strings.Contains(out, "job "+id+" cancelled") {
		t.Fatalf("cancel: %q, want \"job %s cancelled\"", out, id)
	}
}

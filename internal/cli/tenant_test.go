package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkTenantLeavesOtherTenants (issue 12, must-show 6): `work --tenant
// acme` works acme's job and leaves globex's, of the same kind, in its
// queue with no attempt spent (not dead-lettered as ticket-forbidden); a
// `--tenant globex` worker then completes it.
func TestWorkTenantLeavesOtherTenants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := filepath.Join(corpusPath, "pixel.pdf")
	acme := b.submit("--kind", "pdf-info", "--tenant", "acme", "--always-offload", f)
	globex := b.submit("--kind", "pdf-info", "--tenant", "globex", "--always-offload", f)

	r := b.run("", "work", "--kind", "pdf-info", "--tenant", "acme", "--until-empty")
	if r.code != 0 || !strings.Contains(r.stdout, "succeeded 1, failed 0; jobs dead 0") {
		t.Fatalf("work --tenant acme: exit %d, want 0 with one success and nothing dead\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "left in its queue for a worker that serves it") {
		t.Errorf("work --tenant acme does not say it left globex's job:\n%s", r.stderr)
	}
	state := map[int64]jobJSON{}
	for _, j := range b.jobs() {
		state[j.ID] = j
	}
	if j := state[acme.ID]; j.State != "completed" {
		t.Fatalf("acme's job: %s, want completed", j.State)
	}
	if j := state[globex.ID]; j.State == "completed" || j.State == "cancelled" || j.State == "discarded" || j.Attempts != 0 {
		t.Fatalf("globex's job after the acme worker: %s, %d attempts, reason %q; want still queued, no attempt spent", j.State, j.Attempts, j.Reason)
	}

	r = b.run("", "work", "--kind", "pdf-info", "--tenant", "globex", "--until-empty")
	if r.code != 0 || !strings.Contains(r.stdout, "succeeded 1, failed 0; jobs dead 0") {
		t.Fatalf("work --tenant globex: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, j := range b.jobs() {
		if j.State != "completed" {
			t.Errorf("job %d (tenant %s): %s, want completed", j.ID, j.Tenant, j.State)
		}
	}
}

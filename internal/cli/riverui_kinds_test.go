package cli

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestRiverUIKinds drives River UI, as serve mounts it, in headless
// Chromium: its job list shows each job's claimcheck kind (River's job
// kind), not "claimcheck", and its Queues page lists a queue whose jobs
// wait with no worker running.
func TestRiverUIKinds(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	shots := screenshotDir(t)
	b := setup(t)
	dir := t.TempDir()
	in := writeFile(t, filepath.Join(dir, "in.txt"), "a small payload")
	b.submit("--kind", "invoice", "--tenant", "acme", in)
	b.submit("--kind", "invoice", "--tenant", "acme", "--idempotency-key", "inv-2", in)
	b.submit("--kind", "report", "--tenant", "acme", in)
	b.ok("work", "--kind", "report", "--until-empty", "--exec", "--", "cat")
	base := b.serveConsole("127.0.0.1:0")

	html := visit(t, ctx, shots, "riverui-available", base+"/riverui/jobs?state=available", textIncludes("invoice"))
	t.Logf("River UI's available jobs: %s", filepath.Join(shots, "riverui-available.png"))
	if strings.Contains(html, ">claimcheck<") {
		t.Errorf("River UI's job list shows kind claimcheck")
	}
	html = visit(t, ctx, shots, "riverui-completed", base+"/riverui/jobs?state=completed", textIncludes("report"))
	t.Logf("River UI's completed jobs: %s", filepath.Join(shots, "riverui-completed.png"))
	if strings.Contains(html, ">claimcheck<") {
		t.Errorf("River UI's job list shows kind claimcheck")
	}
	code, body := get(t, base+"/riverui/api/jobs?state=available")
	if code != http.StatusOK {
		t.Fatalf("River UI's API: %d %s", code, body)
	}
	var list struct {
		Data []struct {
			Kind  string `json:"kind"`
			Queue string `json:"queue"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 2 || list.Data[0].Kind != "invoice" || list.Data[1].Kind != "invoice" {
		t.Errorf("River UI's available jobs: %+v, want 2 of kind invoice", list.Data)
	}

	html = visit(t, ctx, shots, "riverui-queues", base+"/riverui/queues", textIncludes("report"))
	t.Logf("River UI's queues: %s", filepath.Join(shots, "riverui-queues.png"))
	if !strings.Contains(html, "invoice") {
		t.Errorf("River UI's Queues page omits queue invoice, where 2 jobs wait")
	}
}

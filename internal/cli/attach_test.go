package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
)

// consignmentArgs are submit's --attach flags for a consignment's
// paperwork (three corpus PDFs), and the files' SHA-256 by name.
func consignmentArgs(t *testing.T) ([]string, map[string]string) {
	t.Helper()
	var args []string
	sums := map[string]string{}
	for _, c := range []struct{ name, file string }{
		{"label.pdf", "pixel.pdf"},
		{"commercial-invoice.pdf", "refcard-a4.pdf"},
		{"customs-declaration.pdf", "bash.pdf"},
	} {
		path := filepath.Join(corpusPath, c.file)
		args = append(args, "--attach", c.name+"="+path)
		sums[c.name] = sha256File(t, path)
	}
	return args, sums
}

// TestSubmitAttachments: submit --attach checks a consignment's three
// PDFs in under one ticket; work --exec finds them verified in
// CLAIMCHECK_ATTACHMENTS_DIR, named after the attachments, with the main
// payload on standard input, and the directory is gone afterwards;
// inspect lists them without their keys.
func TestSubmitAttachments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	main := filepath.Join(t.TempDir(), "consignment.txt")
	if err := os.WriteFile(main, []byte("consignment 42: Rotterdam to Felixstowe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	atts, sums := consignmentArgs(t)
	out := b.ok(append([]string{"submit", "--kind", "customs", "--tenant", "acme"}, append(atts, main)...)...)
	t.Logf("submit: %s", strings.TrimSpace(out))
	var j submitted
	if err := json.Unmarshal([]byte(b.ok(append([]string{"--json", "submit", "--kind", "customs", "--tenant", "acme", "--idempotency-key", "c42"}, append(atts, main)...)...)), &j); err != nil {
		t.Fatal(err)
	}
	t.Logf("consignment ticket: %d bytes (3 attachments)", j.TicketBytes)
	if j.TicketBytes > claimcheck.MaxTicketBytes || strings.Join(j.Attachments, ",") != "label.pdf,commercial-invoice.pdf,customs-declaration.pdf" {
		t.Fatalf("submit --json: %+v", j)
	}

	script := `echo "dir=$CLAIMCHECK_ATTACHMENTS_DIR"; cd "$CLAIMCHECK_ATTACHMENTS_DIR" && sha256sum -- * && echo "stdin=$(wc -c)"`
	b.ok("work", "--kind", "customs", "--until-empty", "--exec", "--", "sh", "-c", script)
	res := b.ok("result", strconv.FormatInt(j.ID, 10))
	t.Logf("the --exec command's output:\n%s", res)
	for name, sum := range sums {
		if !strings.Contains(res, sum+"  "+name) {
			t.Errorf("the command did not find %s verified in its directory:\n%s", name, res)
		}
	}
	if !strings.Contains(res, "stdin=40") {
		t.Errorf("the main payload (40 bytes) was not its standard input:\n%s", res)
	}
	dir := strings.TrimPrefix(strings.Fields(res)[0], "dir=")
	if dir == "" {
		t.Fatalf("no CLAIMCHECK_ATTACHMENTS_DIR:\n%s", res)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the attachments directory is left behind: %v", err)
	}

	id := strconv.FormatInt(j.ID, 10)
	text := b.ok("inspect", id)
	var in inspection
	if err := json.Unmarshal([]byte(b.ok("inspect", "--json", "--reveal", id)), &in); err != nil {
		t.Fatal(err)
	}
	if len(in.Attachments) != 3 || in.Main == nil || in.Attachments[2].Name != "customs-declaration.pdf" {
		t.Fatalf("inspect --json: %d attachments, main %v", len(in.Attachments), in.Main != nil)
	}
	for _, a := range in.Attachments {
		if !strings.Contains(text, `attachment "`+a.Name+`" object:`) || strings.Contains(text, a.Key) {
			t.Errorf("inspect shows attachment %s without its object, or with its key:\n%s", a.Name, text)
		}
	}
	t.Logf("inspect:\n%s", text)
}

// TestAttachmentMissing: an attachment deleted before the job runs kills
// it on attempt 1 as payload-missing naming the attachment, the command
// never starts, and dead replay refuses it, naming it too.
func TestAttachmentMissing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	atts, _ := consignmentArgs(t)
	j := b.submit(append([]string{"--kind", "customs", "--tenant", "acme"}, atts...)...)
	id := strconv.FormatInt(j.ID, 10)
	var in inspection
	if err := json.Unmarshal([]byte(b.ok("inspect", "--json", "--reveal", id)), &in); err != nil {
		t.Fatal(err)
	}
	if len(in.Attachments) != 3 || in.Main != nil {
		t.Fatalf("inspect: %d attachments, main %v", len(in.Attachments), in.Main != nil)
	}
	key := in.Attachments[2].Key
	if err := os.Remove(filepath.Join(b.data, "objects", filepath.FromSlash(key))); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	b.dead("work", "--kind", "customs", "--until-empty", "--exec", "--", "sh", "-c", "touch "+marker)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran with an attachment missing")
	}
	js := b.jobs("--state", "dead")
	if len(js) != 1 || js[0].Attempts != 1 || js[0].Reason != claimcheck.ReasonPayloadMissing {
		t.Fatalf("dead: %+v, want job %d dead on attempt 1 as payload-missing", js, j.ID)
	}
	text := b.ok("inspect", id)
	if !strings.Contains(text, `attachment "customs-declaration.pdf"`) || !strings.Contains(text, "MISSING") || strings.Contains(text, key) {
		t.Errorf("inspect:\n%s", text)
	}
	r := b.run("", "dead", "replay", id)
	t.Logf("dead replay: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	if r.code != 1 || !strings.Contains(r.stderr, `attachment "customs-declaration.pdf"`) || !strings.Contains(r.stderr, "nothing to replay") || strings.Contains(r.stderr, key) {
		t.Errorf("dead replay: exit %d\n%s", r.code, r.stderr)
	}
}

// TestSubmitAttachmentsBadInput: bad --attach values are usage errors
// (exit 2) and store nothing.
func TestSubmitAttachmentsBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pdf := filepath.Join(corpusPath, "pixel.pdf")
	empty := filepath.Join(t.TempDir(), "empty.pdf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--attach", "../label.pdf=" + pdf}, "path separator"},
		{[]string{"--attach", "a..pdf=" + pdf}, `contains ".."`},
		{[]string{"--attach", "label.pdf=" + pdf, "--attach", "label.pdf=" + pdf}, "given twice"},
		{[]string{"--attach", "label.pdf"}, "give NAME=FILE"},
		{[]string{"--attach", "label.pdf=-"}, "standard input is the main payload's"},
		{[]string{"--attach", "label.pdf=" + empty}, "payload is empty"},
		{[]string{}, "expected FILE or -, got 0 arguments"},
	} {
		r := b.run("", append([]string{"submit", "--kind", "customs", "--tenant", "acme"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("submit %v: exit %d, want 2 saying %q\n%s", tc.args, r.code, tc.want, r.stderr)
		}
	}
	r := b.run("", "submit", "--kind", "customs", "--tenant", "acme", "--attach", "label.pdf="+filepath.Join(corpusPath, "no-such.pdf"))
	if r.code == 0 || !strings.Contains(r.stderr, "--attach label.pdf") {
		t.Errorf("a missing attachment file: exit %d\n%s", r.code, r.stderr)
	}
	if objs := b.objects(); len(objs) != 0 {
		t.Errorf("refused submits stored %d objects", len(objs))
	}
}

// TestBrokerAttachments: a consignment through the outbox, the relay and
// a broker consumer (RabbitMQ, JetStream): the --exec command finds the
// three attachments verified; a second consignment whose declaration is
// deleted first is dead-lettered on attempt 1 as payload-missing naming it.
func TestBrokerAttachments(t *testing.T) {
	t.Parallel()
	for _, bc := range brokers {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			u := bc.url(t)
			b := setup(t)
			atts, sums := consignmentArgs(t)
			ok := b.submit(append([]string{"--broker", u, "--kind", "customs", "--tenant", "acme"}, atts...)...)
			t.Logf("consignment ticket through %s: %d bytes", bc.name, ok.TicketBytes)
			script := `cd "$CLAIMCHECK_ATTACHMENTS_DIR" && sha256sum -- *`
			b.ok("--broker", u, "work", "--kind", "customs", "--until-empty", "--idle", "1s", "--exec", "--", "sh", "-c", script)
			res := b.ok("result", strconv.FormatInt(ok.ID, 10))
			for name, sum := range sums {
				if !strings.Contains(res, sum+"  "+name) {
					t.Errorf("the command did not find %s verified:\n%s", name, res)
				}
			}

			// Other bytes for the declaration, so its object is this job's alone.
			decl := filepath.Join(t.TempDir(), "declaration.pdf")
			if err := os.WriteFile(decl, []byte("%PDF-1.4 customs declaration 7\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			gone := b.submit("--broker", u, "--kind", "customs", "--tenant", "acme", "--attach", "label.pdf="+filepath.Join(corpusPath, "pixel.pdf"), "--attach", "customs-declaration.pdf="+decl)
			var in inspection
			if err := json.Unmarshal([]byte(b.ok("inspect", "--json", "--reveal", strconv.FormatInt(gone.ID, 10))), &in); err != nil {
				t.Fatal(err)
			}
			if len(in.Attachments) != 2 {
				t.Fatalf("inspect: %d attachments", len(in.Attachments))
			}
			if err := os.Remove(filepath.Join(b.data, "objects", filepath.FromSlash(in.Attachments[1].Key))); err != nil {
				t.Fatal(err)
			}
			r := b.run("", "--broker", u, "work", "--kind", "customs", "--until-empty", "--idle", "1s", "--exec", "--", "sh", "-c", script)
			if r.code != 1 || !strings.Contains(r.stderr, "payload-missing") || !strings.Contains(r.stderr, `attachment "customs-declaration.pdf"`) {
				t.Fatalf("work: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			for _, j := range b.jobs() {
				if j.ID == gone.ID && (j.State != "dead" || j.Reason != claimcheck.ReasonPayloadMissing) {
					t.Errorf("job %d: %+v, want dead as payload-missing", j.ID, j)
				}
			}
		})
	}
}

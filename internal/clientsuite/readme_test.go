package clientsuite_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeSnippet returns the code block of language lang in the clients'
// README (clients/README.md).
func readmeSnippet(t *testing.T, lang string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "clients", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(b)
	m := regexp.MustCompile("(?s)\n```" + lang + "\n(.*?)\n```\n").FindStringSubmatch(section)
	if m == nil {
		t.Fatalf("clients/README.md has no %s block", lang)
	}
	return m[1]
}

// readme runs the README's snippet for c (a producer and a worker in one)
// in a directory of its own holding invoice.pdf (a corpus PDF), as acme:
// it must print "completed SIZE" and leave the result in invoice.json.
func readme(t *testing.T, a *apiDeployment, c *client, pdf string) {
	dir := t.TempDir()
	clients, err := filepath.Abs(filepath.Join(moduleRoot, "clients"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pdf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "invoice.pdf"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	var file string
	env := append(os.Environ(), "CLAIMCHECK_API_URL="+a.url, noBytecode)
	env = append(env, a.as("acme")...)
	switch c.name {
	case "python":
		file = "snippet.py"
		env = append(env, "PYTHONPATH="+filepath.Join(clients, "python"))
		if err := os.WriteFile(filepath.Join(dir, file), []byte(readmeSnippet(t, "python")), 0o600); err != nil {
			t.Fatal(err)
		}
	case "js":
		file = "snippet.mjs"
		// The snippet imports ./clients/js/index.js, as from the module's root.
		if err := os.Symlink(clients, filepath.Join(dir, "clients")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(readmeSnippet(t, "js")), 0o600); err != nil {
			t.Fatal(err)
		}
	case "php":
		file = "snippet.php"
		// The snippet requires clients/php/src/ClaimCheck.php, as from the module's root.
		if err := os.Symlink(clients, filepath.Join(dir, "clients")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(readmeSnippet(t, "php")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.program, file)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's %s snippet: %v\n%s", c.name, err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != 2 || got[0] != "completed" {
		t.Fatalf("the README's %s snippet printed %q, want \"completed SIZE\"", c.name, out)
	}
	res, err := os.ReadFile(filepath.Join(dir, "invoice.json"))
	if err != nil || got[1] != strconv.Itoa(len(res)) {
		t.Fatalf("invoice.json: %v, %d bytes; the snippet printed %s", err, len(res), got[1])
	}
	if _, err := decodeObject(string(res)); err != nil {
		t.Fatalf("invoice.json is not a JSON object: %v: %q", err, res)
	}
}

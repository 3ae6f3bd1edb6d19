package clientsuite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/testenv"
)

// The clients' interpreters, as the tests run them.

// The module's root, relative to this package's directory.
const moduleRoot = "../.."

// childTimeout bounds each python3 or node run (a suite, or one step of an
// exchange); the machine may be loaded 10-25.
const childTimeout = 15 * time.Minute

// client is one language's client: the interpreter, the client's
// directory and its example program; missing says why it cannot run.
type client struct {
	name    string // what its example's worker writes as "worker"
	program string
	dir     string
	example string
	missing string
}

func need(t *testing.T, c *client) {
	t.Helper()
	if c.missing != "" {
		testenv.Unavailable(t, c.missing)
	}
}

// runEnv runs the interpreter with args in the client's directory, the
// server's URL in CLAIMCHECK_API_URL and env (NAME=VALUE) added to the
// environment, and returns stdout and stderr together; a non-zero exit
// fails t.
func (c *client) runEnv(t *testing.T, srv string, env []string, args ...string) string {
	t.Helper()
	stdout, stderr, err := c.exec(t, srv, env, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(c.program), strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout + stderr
}

func (c *client) exec(t *testing.T, srv string, env []string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.program, args...)
	cmd.Dir = c.dir
	cmd.Env = append(append(os.Environ(), "CLAIMCHECK_API_URL="+srv, noBytecode), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func pythonClient() *client {
	c := &client{name: "python", dir: filepath.Join(moduleRoot, "clients", "python"), example: "example.py"}
	c.program, c.missing = lookProgram("CLAIMCHECK_TEST_PYTHON", "python3",
		"install Python 3.11 or later (Debian: apt-get install python3)",
		"import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)", "-c")
	return c
}

func jsClient() *client {
	c := &client{name: "js", dir: filepath.Join(moduleRoot, "clients", "js"), example: "example.js"}
	c.program, c.missing = lookProgram("CLAIMCHECK_TEST_NODE", "node",
		"install Node.js 20 or later (Debian: apt-get install nodejs, from a release that has 20)",
		"process.exit(Number(process.versions.node.split('.')[0]) >= 20 ? 0 : 1)", "-e")
	return c
}

func phpClient() *client {
	c := &client{name: "php", dir: filepath.Join(moduleRoot, "clients", "php"), example: "example.php"}
	c.program, c.missing = lookProgram("CLAIMCHECK_TEST_PHP", "php",
		"install PHP 8.1 or later with its curl extension (Debian: apt-get install php-cli php-curl)",
		"exit(PHP_VERSION_ID >= 80100 && extension_loaded('curl') ? 0 : 1);", "-r")
	return c
}

// lookProgram finds name (or $env) and checks its version with the
// one-line program check (run with flag): the path, or why it cannot be
// used.
func lookProgram(env, name, how, check, flag string) (string, string) {
	path := os.Getenv(env)
	if path == "" {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", name + " is not on PATH: " + how + ", or set " + env + " to its path"
		}
		path = p
	}
	if err := exec.Command(path, flag, check).Run(); err != nil {
		return "", path + " is too old or does not run (" + err.Error() + "): " + how + ", or set " + env + " to one that is"
	}
	return path, ""
}

// pyUnittest runs `python3 -m unittest -v module` in the Python client's
// directory and fails t unless every test ran and passed (a skip, with
// the server there, is a failure too).
func pyUnittest(t *testing.T, c *client, srv, module string) {
	t.Helper()
	pyUnittestEnv(t, c, srv, nil, module)
}

// pyUnittestEnv is pyUnittest with env (NAME=VALUE) added to the
// environment.
func pyUnittestEnv(t *testing.T, c *client, srv string, env []string, module string) {
	t.Helper()
	out := c.runEnv(t, srv, env, "-m", "unittest", "-v", module)
	m := regexp.MustCompile(`(?m)^Ran (\d+) tests? in ([0-9.]+)s\s+^(OK|FAILED)(.*)$`).FindStringSubmatch(out)
	if m == nil || m[3] != "OK" {
		t.Fatalf("python3 -m unittest %s did not pass:\n%s", module, out)
	}
	if strings.Contains(m[4], "skipped") {
		t.Fatalf("python3 -m unittest %s skipped tests: %s\n%s", module, m[4], out)
	}
	t.Logf("python3 -m unittest %s: %s tests OK in %s s", module, m[1], m[2])
}

// nodeTest runs `node --test file` in the JavaScript client's directory
// and fails t unless every test ran and passed.
func nodeTest(t *testing.T, c *client, srv, file string) {
	t.Helper()
	nodeTestEnv(t, c, srv, nil, file)
}

// nodeTestEnv is nodeTest with env (NAME=VALUE) added to the environment.
func nodeTestEnv(t *testing.T, c *client, srv string, env []string, file string) {
	t.Helper()
	out := c.runEnv(t, srv, env, "--test", file)
	count := func(what string) int {
		m := regexp.MustCompile(`(?m)^# ` + what + ` (\d+)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("node --test %s printed no %q count:\n%s", file, what, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	pass, fail, skipped := count("pass"), count("fail"), count("skipped")
	if fail != 0 || skipped != 0 || pass == 0 {
		t.Fatalf("node --test %s: %d passed, %d failed, %d skipped:\n%s", file, pass, fail, skipped, out)
	}
	t.Logf("node --test %s: %d tests passed", file, pass)
}

// phpTestEnv runs `php file` (a suite printing TAP lines and "# pass N",
// "# fail N", "# skipped N") in the PHP client's directory with env
// (NAME=VALUE) added to the environment, and fails t unless every test ran
// and passed.
func phpTestEnv(t *testing.T, c *client, srv string, env []string, file string) {
	t.Helper()
	stdout, stderr, err := c.exec(t, srv, env, file)
	out := stdout + stderr
	if err != nil {
		t.Fatalf("php %s: %v\n%s", file, err, out)
	}
	count := func(what string) int {
		m := regexp.MustCompile(`(?m)^# ` + what + ` (\d+)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("php %s printed no %q count:\n%s", file, what, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	pass, fail, skipped := count("pass"), count("fail"), count("skipped")
	if fail != 0 || skipped != 0 || pass == 0 {
		t.Fatalf("php %s: %d passed, %d failed, %d skipped:\n%s", file, pass, fail, skipped, out)
	}
	t.Logf("php %s: %d tests passed\n%s", file, pass, stdout)
}

// decodeObject decodes one line a client printed: a JSON object.
func decodeObject(line string) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("null, not an object")
	}
	return m, nil
}

// noBytecode keeps python3 from writing __pycache__ into the checkout.
const noBytecode = "PYTHONDONTWRITEBYTECODE=1"

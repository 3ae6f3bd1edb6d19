// Package testenv gives tests the address of a service they need from the
// environment, skipping the test when it is not set on a developer's
// machine and failing it under CI (CI set, as .ci/run runs), where a
// silent skip would report a suite as passed that never ran.
package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/claimcheck/claimcheck/internal/corpus"
)

// Require returns the value of the environment variable env. When env is
// unset or empty it skips t with a message naming env and how (what to run
// to get the service, e.g. `eval "$(scripts/fake-gcs.sh env)"`), or, when
// the CI variable is set, fails t with the same message.
func Require(t testing.TB, env, how string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" {
		return v
	}
	Unavailable(t, env+" is not set, so the service this test needs is not known: "+how)
	return ""
}

// Unavailable skips t with msg, saying what the test needs and how to get
// it, or, when the CI variable is set, fails t with it.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set: CI must run every suite, so this is a failure, not a skip)")
	}
	t.Skip(msg)
}

// BigPDF returns the path of dir/big.pdf, the large corpus document the
// module does not ship, making it first when it is not there
// (corpus.EnsureBig: `go run ./internal/tools/mkbigpdf`, about a minute on
// two cores, built without the race detector under which the merge would
// take several), so a plain `go test` runs the tests that need it instead
// of skipping them. It fails t when the document cannot be made.
func BigPDF(t testing.TB, dir string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	path, err := corpus.EnsureBig(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// moduleRoot is the nearest directory above the working directory (a test's
// package directory) that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

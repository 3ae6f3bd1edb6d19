// Package testenv gives tests the address of a service they need from the
// environment, skipping the test when it is not set on a developer's
// machine and failing it under CI (CI set, as .ci/run runs), where a
// silent skip would report a suite as passed that never ran.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
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
// module does not ship, skipping t when it has not been made yet (or
// failing it under CI, whose .ci/run makes it first). Tests do not make it
// themselves: merging 43 MiB under the race detector takes minutes.
func BigPDF(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "big.pdf")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	msg := path + " is not there (the module does not ship it): make it with `go run ./internal/tools/mkbigpdf` from the module root"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set: .ci/run makes it before the tests, so this is a failure, not a skip)")
	}
	t.Skip(msg)
	return ""
}

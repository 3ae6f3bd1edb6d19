// Package testenv gives tests the address of a service they need from the
// environment, skipping the test when it is not set on a developer's
// machine and failing it under CI (CI set, as .ci/run runs), where a
// silent skip would report a suite as passed that never ran.
package testenv

import (
	"os"
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
	msg := env + " is not set, so the service this test needs is not known: " + how
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set: CI must run every suite, so this is a failure, not a skip)")
	}
	t.Skip(msg)
	return ""
}

//go:build !linux

package cli

import "os/exec"

// ownProcessGroup does nothing where process groups and the parent-death
// signal are not available: cancelling kills the command itself only, and a
// killed worker's --exec command runs to its end.
func ownProcessGroup(*exec.Cmd) {}

// dieWithParent does nothing where the parent-death signal is not
// available.
func dieWithParent(*exec.Cmd) {}

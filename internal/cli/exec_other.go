//go:build !linux

package cli

import "os/exec"

// dieWithParent does nothing where the parent-death signal is not
// available: a killed worker's --exec command runs to its end.
func dieWithParent(*exec.Cmd) {}

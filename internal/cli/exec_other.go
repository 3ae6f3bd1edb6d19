//go:build !linux

package cli

import "os/exec"

// ownProcessGroup does nothing where process groups and the parent-death
// signal are not available: cancelling kills the command itself only, and a
// killed worker's --exec command runs to its end.
func ownProcessGroup(*exec.Cmd) {}

// runGuarded runs cmd (cmd.Run): without process groups, a killed
// worker's --exec command and its children run to their end.
func runGuarded(cmd *exec.Cmd) error { return cmd.Run() }

// dieWithParent does nothing where the parent-death signal is not
// available.
func dieWithParent(*exec.Cmd) {}

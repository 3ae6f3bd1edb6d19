package cli

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts the --exec command in a process group of its own
// and makes cancelling its context kill the whole group (SIGKILL to
// -pgid), so no grandchild outlives it. Linux also kills the command itself
// when the worker dies, even by SIGKILL, so that it never runs on for a job
// that will be handed to another worker.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// dieWithParent asks Linux to kill cmd when this process dies, even by
// SIGKILL.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

package cli

import (
	"os/exec"
	"syscall"
)

// dieWithParent asks Linux to kill the --exec command when the worker
// dies, even by SIGKILL, so a handler never runs on for a job that River
// will hand to another worker.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

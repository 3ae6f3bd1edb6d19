package cli

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// ownProcessGroup starts the --exec command in a process group of its own
// and makes cancelling its context kill the whole group (SIGKILL to
// -pgid), so no grandchild outlives it. Linux also kills the command itself
// when the worker dies, even by SIGKILL, so that it never runs on for a job
// that will be handed to another worker (the parent-death signal reaches
// the direct child only: runGuarded's watchdog ends the rest of the group).
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// runGuarded runs cmd in a process group of its own (ownProcessGroup) and
// returns cmd.Wait's error. Beside it, in the same group, runs a watchdog,
// /bin/sh reading a pipe that only this process writes to: when cmd has
// ended, or this process dies (even by SIGKILL, when Linux closes the
// pipe), the watchdog reads end of file and kills the group, so no
// grandchild of the command (sh -c '… &') outlives the command or a killed
// worker. Without /bin/sh there is no watchdog, and a killed worker's
// grandchildren run on (the command itself is still killed).
func runGuarded(cmd *exec.Cmd) error {
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	stop := watchGroup(cmd.Process.Pid)
	defer stop()
	return cmd.Wait()
}

// watchGroup starts the watchdog of process group pgid and returns what
// ends it (and the group).
func watchGroup(pgid int) (stop func()) {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return func() {}
	}
	dog := exec.Command("/bin/sh", "-c", `read x; kill -s KILL -- "-$1"`, "claimcheck-watchdog", strconv.Itoa(pgid))
	dog.Stdin = r
	dog.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	err = dog.Start()
	r.Close()
	if err != nil {
		w.Close()
		return func() {}
	}
	return func() {
		w.Close()
		dog.Wait()
	}
}

// dieWithParent asks Linux to kill cmd when this process dies, even by
// SIGKILL.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

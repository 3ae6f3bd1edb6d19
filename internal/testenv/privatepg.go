package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PrivatePG is a PostgreSQL cluster of a test's own, made with initdb in a
// temporary directory and listening on a free port of 127.0.0.1 (trust
// authentication, user postgres), for fault tests that kill the database
// (Kill: SIGKILL, as an operator's kill -9 or the OOM killer would) and
// start it again (Start). The shared PostgreSQL of the other tests is
// never touched.
type PrivatePG struct {
	t    testing.TB
	bin  string // directory of initdb, postgres
	dir  string // data directory
	port int
	cred *syscall.Credential // run as the postgres OS user when root

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartPrivatePG makes, starts and (at the end of t) stops a private
// cluster. It skips t (fails it under CI) when no PostgreSQL server
// binaries are found under /usr/lib/postgresql/*/bin (or $PG_BIN), or,
// running as root, there is no postgres OS user to run them as.
func StartPrivatePG(t testing.TB) *PrivatePG {
	t.Helper()
	bin := os.Getenv("PG_BIN")
	if bin == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Strings(dirs)
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				bin = d // the newest version sorts last
			}
		}
	}
	if bin == "" {
		Unavailable(t, "no PostgreSQL server binaries (initdb, postgres) under /usr/lib/postgresql/*/bin: install postgresql or set PG_BIN")
		return nil
	}
	pg := &PrivatePG{t: t, bin: bin}
	root, err := os.MkdirTemp("", "claimcheck-privatepg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	pg.dir = filepath.Join(root, "data")
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			Unavailable(t, "running as root and there is no postgres OS user to run a private PostgreSQL as: "+err.Error())
			return nil
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := pg.command("initdb", "-D", pg.dir, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pg.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	pg.Start()
	t.Cleanup(pg.stop)
	return pg
}

func (pg *PrivatePG) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(pg.bin, name), args...)
	if pg.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	}
	cmd.Dir = "/"
	return cmd
}

// URL is the cluster's database postgres, as pipeline.Config.Database
// takes it.
func (pg *PrivatePG) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// Start starts the cluster (after Kill) and waits up to 30 s until it
// accepts connections.
func (pg *PrivatePG) Start() {
	pg.t.Helper()
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.cmd != nil {
		return
	}
	cmd := pg.command("postgres", "-D", pg.dir, "-p", strconv.Itoa(pg.port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		pg.t.Fatalf("start private PostgreSQL: %v", err)
	}
	pg.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", pg.port), time.Second)
		if err == nil {
			c.Close()
			if out, err := pg.command("pg_isready", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "postgres").CombinedOutput(); err == nil {
				return
			} else if time.Now().After(deadline) {
				pg.t.Fatalf("private PostgreSQL not ready after 30 s: %s", strings.TrimSpace(string(out)))
			}
		} else if time.Now().After(deadline) {
			pg.t.Fatalf("private PostgreSQL not listening after 30 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill sends SIGKILL to the postmaster and its backends and waits for the
// postmaster to exit: the database vanishes at once, mid-transaction, as
// with kill -9. Start brings it back (after crash recovery).
func (pg *PrivatePG) Kill() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.cmd == nil {
		return
	}
	pid := pg.cmd.Process.Pid
	// The backends are the postmaster's children: stop the postmaster
	// from forking more, then kill them too, or they linger and hold the
	// old cluster's shared memory.
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	out, _ := exec.Command("pgrep", "-P", strconv.Itoa(pid)).Output()
	_ = pg.cmd.Process.Kill()
	var children []int
	for _, f := range strings.Fields(string(out)) {
		if c, err := strconv.Atoi(f); err == nil {
			children = append(children, c)
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
	}
	_ = pg.cmd.Wait()
	pg.cmd = nil
	for range 100 {
		alive := false
		for _, c := range children {
			if syscall.Kill(c, 0) == nil {
				alive = true
			}
		}
		if !alive {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = os.Remove(filepath.Join(pg.dir, "postmaster.pid"))
}

func (pg *PrivatePG) stop() {
	pg.mu.Lock()
	cmd := pg.cmd
	pg.cmd = nil
	pg.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

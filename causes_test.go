package claimcheck_test

import (
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gocloud.dev/secrets"
	_ "gocloud.dev/secrets/awskms"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/outageproxy"
)

// fullDisk mounts a 1 MiB tmpfs of its own (a file system that fills up
// for real) and returns its directory; it is unmounted when t ends.
// Mounting needs root (or CAP_SYS_ADMIN): without it the test skips, and
// fails when CI is set.
func fullDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mount a 1 MiB tmpfs: %v", err)
		}
		t.Skipf("mount a 1 MiB tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// s3At opens an s3:// store whose endpoint is endpoint, with static
// credentials: what is at the endpoint (nothing, a TLS server, a silent
// listener) decides the failure, not the credential chain.
func s3At(t *testing.T, endpoint, extra string) *claimcheck.Store {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "claimcheck-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "claimcheck-test-secret")
	t.Setenv("AWS_PROFILE", "")
	s, err := claimcheck.OpenStore(t.Context(), "s3://claimcheck-causes?region=us-east-1&use_path_style=true&endpoint="+endpoint+extra,
		&claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var causes = []error{claimcheck.ErrNoSpace, claimcheck.ErrConnRefused, claimcheck.ErrDNS, claimcheck.ErrTLS, claimcheck.ErrTimeout}

// assertCause checks that err is a transient ErrUnavailable whose cause is
// cause (and no other), whose message says so with want, and names no key.
func assertCause(t *testing.T, what string, err, cause error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if !errors.Is(err, claimcheck.ErrUnavailable) || claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonUnavailable {
		t.Errorf("%s: %v: want transient ErrUnavailable (reason %s), got permanent=%v reason=%q",
			what, err, claimcheck.ReasonUnavailable, claimcheck.IsPermanent(err), claimcheck.Reason(err))
	}
	for _, c := range causes {
		if got := errors.Is(err, c); got != (c == cause) {
			t.Errorf("%s: %v: errors.Is(err, %q) = %v", what, err, c, got)
		}
	}
	if desc, c := claimcheck.CauseOf(err); c != cause || desc == "" {
		t.Errorf("%s: CauseOf = %v, %q; want %v", what, c, desc, cause)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
	if strings.Contains(err.Error(), claimcheck.PrefixPayloads) || strings.Contains(err.Error(), claimcheck.PrefixResults) {
		t.Errorf("%s: %q names an object key", what, err)
	}
}

// A full file:// store: the cause is named, the standard error is in the
// chain, and no object (and no temporary file) is left.
func TestCauseNoSpaceFileStore(t *testing.T) {
	dir := fullDisk(t)
	b := open(t, "file://"+filepath.Join(dir, "bucket"), nil) // spool elsewhere
	_, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(randomBytes(2<<20, 1)), nil)
	assertCause(t, "check in 2 MiB to a 1 MiB disk", err, claimcheck.ErrNoSpace, "no space left on device")
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("%v: errors.Is(err, syscall.ENOSPC) = false", err)
	}
	if got := filesUnder(t, filepath.Join(dir, "bucket")); len(got) != 0 {
		t.Errorf("a failed check-in left files: %v", got)
	}
}

// A full spool directory is the data directory's failure, not the
// payload reader's.
func TestCauseNoSpaceSpool(t *testing.T) {
	dir := fullDisk(t)
	b := open(t, "mem://", &claimcheck.Options{SpoolDir: filepath.Join(dir, "spool")})
	_, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(randomBytes(2<<20, 2)), nil)
	assertCause(t, "spool 2 MiB on a 1 MiB disk", err, claimcheck.ErrNoSpace, "spool", "no space left on device")
	if strings.Contains(err.Error(), "read payload") {
		t.Errorf("%q blames the payload's reader", err)
	}
}

func TestCauseConnectionRefused(t *testing.T) {
	addr := closedPort(t)
	s := s3At(t, "http://"+addr, "")
	_, err := s.CheckIn(t.Context(), "acme", bytes.NewReader(randomBytes(100<<10, 3)), nil)
	assertCause(t, "check in to a closed port", err, claimcheck.ErrConnRefused, "connection refused by "+addr)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%v: errors.Is(err, syscall.ECONNREFUSED) = false", err)
	}
}

func TestCauseDNS(t *testing.T) {
	s := s3At(t, "http://claimcheck-no-such-host.invalid:8333", "") // RFC 2606: .invalid never resolves
	_, err := s.CheckIn(t.Context(), "acme", bytes.NewReader(randomBytes(100<<10, 4)), nil)
	assertCause(t, "check in to a name that does not resolve", err, claimcheck.ErrDNS, "DNS failure", "claimcheck-no-such-host.invalid")
	var dns *net.DNSError
	if !errors.As(err, &dns) {
		t.Errorf("%v: no *net.DNSError in the chain", err)
	}
}

func TestCauseTLS(t *testing.T) {
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler()) // its certificate is signed by no known authority
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0)           // it logs each refused handshake
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	for _, c := range []struct{ name, endpoint, addr, want string }{
		{"untrusted certificate", untrusted.URL, untrusted.Listener.Addr().String(), "certificate"},
		{"TLS to a plain HTTP port", "https://" + plain.Listener.Addr().String(), plain.Listener.Addr().String(), "http://"},
	} {
		s := s3At(t, c.endpoint, "")
		_, err := s.CheckIn(t.Context(), "acme", bytes.NewReader(randomBytes(100<<10, 5)), nil)
		assertCause(t, c.name, err, claimcheck.ErrTLS, "TLS failure with "+c.addr, c.want)
	}
}

// A server that accepts the connection and never answers fails the
// check-in within the stall bound (three attempts of the SDK, with its
// backoff) naming the endpoint, instead of blocking.
func TestCauseStalledServer(t *testing.T) {
	addr := outageproxy.Silent(t)
	s := s3At(t, "http://"+addr, "&stall_timeout=300ms&connect_timeout=1s")
	start := time.Now()
	_, err := s.CheckIn(t.Context(), "acme", bytes.NewReader(randomBytes(100<<10, 6)), nil)
	elapsed := time.Since(start)
	assertCause(t, "check in to a silent server", err, claimcheck.ErrTimeout, addr, "no progress", "300ms")
	if elapsed > 10*time.Second {
		t.Errorf("check-in failed after %v; the bound with stall_timeout=300ms is 3 × 300ms plus the SDK's backoff", elapsed)
	}
	t.Logf("stalled check-in failed after %v: %v", elapsed, err)
}

func TestStoreTimeoutParameters(t *testing.T) {
	for _, bad := range []string{"stall_timeout=abc", "stall_timeout=1ms", "connect_timeout=2h", "connect_timeout=-1s"} {
		_, err := claimcheck.OpenStore(t.Context(), "s3://b?region=us-east-1&"+bad, nil)
		if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("OpenStore with %s: %v, want ErrConfig naming the parameter", bad, err)
		}
	}
}

// A server that accepts and closes at once (what an outage proxy's cut
// looks like) is named, with its endpoint, though it has no sentinel.
func TestCauseConnectionClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	s := s3At(t, "http://"+ln.Addr().String(), "")
	_, err = s.CheckIn(t.Context(), "acme", bytes.NewReader(randomBytes(100<<10, 7)), nil)
	// net/http reports the hang-up as EOF, as "server closed idle
	// connection" when it races with reusing the connection, or as a
	// reset when the close lands while the request body is still being
	// written (seen in CI under load).
	addr := ln.Addr().String()
	named := strings.Contains(err.Error(), "connection closed by "+addr) ||
		strings.Contains(err.Error(), "connection reset by "+addr) ||
		strings.Contains(err.Error(), "request to "+addr+" failed: http: server closed idle connection")
	if !errors.Is(err, claimcheck.ErrUnavailable) || !named {
		t.Fatalf("check in to a server that hangs up: %v, want ErrUnavailable naming the closed connection", err)
	}
	if strings.Contains(err.Error(), claimcheck.PrefixPayloads) {
		t.Fatalf("%q names an object key", err)
	}
}

// A keeper (AWS KMS through gocloud) whose server accepts and never
// answers fails the check-in within Options.KeeperTimeout as ErrKeeper,
// cause ErrTimeout, and nothing is stored.
func TestCauseKeeperTimeout(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "claimcheck-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "claimcheck-test-secret")
	silent := outageproxy.Silent(t)
	k, err := secrets.OpenKeeper(t.Context(), "awskms://claimcheck-test-key?region=us-east-1&endpoint=http://"+silent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	b := setup(t, &claimcheck.Options{Keeper: k, KeeperTimeout: 500 * time.Millisecond})
	start := time.Now()
	_, err = b.store.CheckIn(b.ctx, "acme", bytes.NewReader(randomBytes(100<<10, 8)), nil)
	elapsed := time.Since(start)
	if !errors.Is(err, claimcheck.ErrKeeper) || !errors.Is(err, claimcheck.ErrTimeout) || claimcheck.IsPermanent(err) ||
		!strings.Contains(err.Error(), "did not answer within 500ms") {
		t.Fatalf("check in with a silent keeper: %v, want transient ErrKeeper with cause ErrTimeout naming the bound", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("check in with a silent keeper failed after %v, want about 500ms", elapsed)
	}
	b.assertObjects(t)
	t.Logf("after %v: %v", elapsed, err)
}

package dbopen

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/outageproxy"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

func mustParse(t *testing.T, database string) Target {
	t.Helper()
	target, err := Parse(database)
	if err != nil {
		t.Fatalf("Parse(%q): %v", database, err)
	}
	return target
}

// A PostgreSQL server that accepts and never answers fails Open within
// the stall timeout, naming its endpoint.
func TestOpenPostgresStalled(t *testing.T) {
	t.Parallel()
	addr := outageproxy.Silent(t)
	target := mustParse(t, "postgres://postgres@"+addr+"/claimcheck?sslmode=disable&stall_timeout=300ms")
	start := time.Now()
	db, err := Open(context.Background(), target, nil)
	elapsed := time.Since(start)
	if err == nil {
		db.Close()
		t.Fatal("Open of a silent server succeeded")
	}
	if !errors.Is(err, claimcheck.ErrUnavailable) || !errors.Is(err, claimcheck.ErrTimeout) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open of a silent server: %v, want ErrUnavailable and ErrTimeout naming %s", err, addr)
	}
	if elapsed > 5*time.Second {
		t.Fatalf("Open of a silent server failed after %v, want about 300ms (a retry or two)", elapsed)
	}
	t.Logf("after %v: %v", elapsed, err)
}

func TestOpenPostgresRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	target := mustParse(t, "postgres://postgres@"+addr+"/claimcheck?sslmode=disable")
	_, err = Open(context.Background(), target, nil)
	if !errors.Is(err, claimcheck.ErrUnavailable) || !errors.Is(err, claimcheck.ErrConnRefused) || !strings.Contains(err.Error(), "connection refused by "+addr) {
		t.Fatalf("Open of a closed port: %v, want ErrUnavailable and ErrConnRefused naming %s", err, addr)
	}
}

// A statement on a connection whose server falls silent (a proxy that
// stops forwarding the server's bytes) fails within the stall timeout; the
// pool connects again once the server answers.
func TestPostgresStatementStalls(t *testing.T) {
	t.Parallel()
	base := testenv.Require(t, "CLAIMCHECK_TEST_DATABASE_URL", "a PostgreSQL URL such as postgres://postgres@127.0.0.1:5432/claimcheck_test?sslmode=disable")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := outageproxy.New(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("stall_timeout", "500ms")
	u.RawQuery = q.Encode()
	target := mustParse(t, u.String())
	ctx := context.Background()
	db, err := Open(ctx, target, &Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	proxy.Freeze()
	start := time.Now()
	_, err = db.ExecContext(ctx, "SELECT 1")
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("a statement with the server silent succeeded")
	}
	if why, c := claimcheck.CauseOf(err); c != claimcheck.ErrTimeout || !strings.Contains(why, proxy.Addr()) {
		t.Fatalf("statement with the server silent: %v (cause %v %q), want ErrTimeout naming %s", err, c, why, proxy.Addr())
	}
	if elapsed > 3*time.Second {
		t.Fatalf("statement failed after %v, want about 500ms", elapsed)
	}
	t.Logf("after %v: %v", elapsed, err)
	proxy.Restore()
	if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatalf("after the server answers again: %v", err)
	}
}

func TestParseStallTimeout(t *testing.T) {
	t.Parallel()
	if _, err := Parse("postgres://u@h/db?stall_timeout=5s&connect_timeout=3"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"stall_timeout=5", "stall_timeout=1ms", "stall_timeout=x"} {
		if _, err := Parse("postgres://u:secret@h/db?" + bad); err == nil || !strings.Contains(err.Error(), "stall_timeout") || strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse with %s: %v, want an error naming stall_timeout without the password", bad, err)
		}
	}
}

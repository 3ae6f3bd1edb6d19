package cli

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// lostKey submits twice (sealed under the data directory's key file),
// removes the key file and returns its path and the key's id.
func lostKey(t *testing.T, b *cliBundle, args ...string) (path, id string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "p.txt")
	if err := os.WriteFile(f, []byte("sealed under the first key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		b.submit(append(args, "--kind", "count", "--tenant", "acme", f)...)
	}
	path = filepath.Join(b.data, "keys", keyFileName)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key, err := claimcheck.DecodeLocalKey(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	return path, claimcheck.LocalKeyID(key)
}

// noKeyFile fails the test when path exists.
func noKeyFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("a new key file %s was written", path)
	}
}

// TestLostKeyRefused (issue 27): after sealed submits, a removed key file
// is refused, never replaced, whether the payloads traveled inline (only
// the job database knows they are sealed: on SQLite a text search of
// River's binary JSON never found them, and a new key was made) or as
// objects: exit 2, naming the file and the key id the job database
// records, and no key file written.
func TestLostKeyRefused(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"SQLite", "PostgreSQL"} {
		for _, mode := range []string{"Inline", "Offloaded"} {
			t.Run(mode+"/"+db, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				var args []string
				if db == "PostgreSQL" {
					args = append(args, "--database", dbtest.Postgres(t))
				}
				if mode == "Offloaded" {
					args = append(args, "--always-offload")
				}
				path, id := lostKey(t, b, args...)
				f := filepath.Join(t.TempDir(), "q.txt")
				if err := os.WriteFile(f, []byte("after the key was lost"), 0o600); err != nil {
					t.Fatal(err)
				}
				r := b.run("", append(args, "submit", "--kind", "count", "--tenant", "acme", f)...)
				t.Logf("submit without the key file: exit %d\n%s", r.code, r.stderr)
				if r.code != 2 || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, "job database records payloads or results sealed under key id "+id) {
					t.Errorf("exit %d, want 2 naming %s and the recorded key id %s:\n%s", r.code, path, id, r.stderr)
				}
				noKeyFile(t, path)
			})
		}
	}
}

// TestLostKeyDoubtRefused: when the job database cannot say which keys
// sealed its jobs, no key is made either: unreachable, exit 1 (transient)
// with the connection's failure leading; answering but unreadable, exit 2.
func TestLostKeyDoubtRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path, _ := lostKey(t, b)
	f := filepath.Join(t.TempDir(), "q.txt")
	if err := os.WriteFile(f, []byte("after the key was lost"), 0o600); err != nil {
		t.Fatal(err)
	}
	submit := []string{"submit", "--kind", "count", "--tenant", "acme", f}

	r := b.run("", append([]string{"--database", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"}, submit...)...)
	msg := strings.TrimPrefix(r.stderr, "claimcheck: ")
	if i := strings.Index(msg, "connection refused"); r.code != 1 || i < 0 || strings.Contains(msg[:i], "key file") {
		t.Errorf("unreachable database: exit %d, want 1 with the cause first:\n%s", r.code, r.stderr)
	}
	t.Logf("unreachable database: exit %d\n%s", r.code, r.stderr)
	noKeyFile(t, path)

	// The table is there but cannot be read as claimcheck_key.
	sdb, err := sql.Open("sqlite", filepath.Join(b.data, "claimcheck.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sdb.Exec(`DROP TABLE claimcheck_key; CREATE TABLE claimcheck_key (other TEXT)`)
	sdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	r = b.run("", submit...)
	if r.code != 2 || !strings.Contains(r.stderr, "job database cannot be read") || !strings.Contains(r.stderr, "key_id") {
		t.Errorf("unreadable key records: exit %d, want 2 naming the failed read:\n%s", r.code, r.stderr)
	}
	t.Logf("unreadable key records: exit %d\n%s", r.code, r.stderr)
	noKeyFile(t, path)
}

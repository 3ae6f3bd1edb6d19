package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
)

// TestKeeperPostures: the same bytes checked in under the data directory's
// key, under another key, and with --keeper none are three objects, one per
// posture, and every job completes with its own keeper.
func TestKeeperPostures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := filepath.Join(t.TempDir(), "same.txt")
	if err := os.WriteFile(f, []byte("the same bytes under three postures"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := strings.TrimSpace(b.ok("keys", "--new"))
	if !strings.HasPrefix(other, "base64key://") {
		t.Fatalf("keys --new printed %q", other)
	}
	if _, err := claimcheck.KeeperID(other); err != nil {
		t.Fatal(err)
	}
	b.submit("--always-offload", "--kind", "mine", "--tenant", "acme", f)
	b.submit("--always-offload", "--keeper", other, "--kind", "other", "--tenant", "acme", f)
	b.submit("--always-offload", "--keeper", "none", "--kind", "plain", "--tenant", "acme", f)
	if objs := b.objects(); len(objs) != 3 {
		t.Errorf("%d objects for one payload under three postures, want 3: %v", len(objs), objs)
	}
	b.ok("--keeper", other, "work", "--kind", "other", "--until-empty", "--exec", "--", "cat")
	b.ok("work", "--kind", "mine", "--until-empty", "--exec", "--", "cat")
	b.ok("--keeper", "none", "work", "--kind", "plain", "--until-empty", "--exec", "--", "cat")
	for _, j := range b.jobs("--kind", "mine") {
		if j.State != "completed" {
			t.Errorf("job %d (data directory's key): %s", j.ID, j.State)
		}
	}
	for _, j := range b.jobs("--kind", "other") {
		if j.State != "completed" {
			t.Errorf("job %d (another key): %s", j.ID, j.State)
		}
	}
	for _, j := range b.jobs("--kind", "plain") {
		if j.State != "completed" {
			t.Errorf("job %d (--keeper none): %s", j.ID, j.State)
		}
	}
}

// TestKeysShareAcrossHosts: `claimcheck keys` prints the data directory's
// key as base64key://, which another data directory (another host) takes as
// --keeper; the key file itself is readable by base64key:// as it is.
func TestKeysShareAcrossHosts(t *testing.T) {
	t.Parallel()
	producer, worker := setup(t), setup(t)
	store := "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "bucket"))
	db := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "jobs.db"))
	f := filepath.Join(t.TempDir(), "p.txt")
	if err := os.WriteFile(f, []byte("from host one to host two"), 0o600); err != nil {
		t.Fatal(err)
	}
	producer.submit("--store", store, "--database", db, "--always-offload", "--kind", "count", "--tenant", "acme", f)
	key := strings.TrimSpace(producer.ok("keys"))
	raw, err := os.ReadFile(filepath.Join(producer.data, "keys", keyFileName))
	if err != nil {
		t.Fatal(err)
	}
	if key != "base64key://"+strings.TrimSpace(string(raw)) {
		t.Errorf("keys printed %q, the key file holds %q: base64key:// must take the file as it is", key, raw)
	}
	worker.ok("--store", store, "--database", db, "--keeper", key, "work", "--kind", "count", "--until-empty", "--exec", "--", "wc", "-c")
	for _, j := range worker.jobs("--store", store, "--database", db, "--keeper", key) {
		if j.State != "completed" {
			t.Errorf("job %d worked on the second host with the shared key: %s", j.ID, j.State)
		}
	}
}

// TestMissingKeyFileRefused: with sealed payloads present, a missing key
// file is an error naming the file, not a new key; restored, every job
// completes.
func TestMissingKeyFileRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := filepath.Join(t.TempDir(), "p.txt")
	if err := os.WriteFile(f, []byte("sealed under the first key"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.submit("--always-offload", "--kind", "count", "--tenant", "acme", f)
	path := filepath.Join(b.data, "keys", keyFileName)
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"submit", "--kind", "count", "--tenant", "acme", f},
		{"work", "--kind", "count", "--until-empty", "--exec", "--", "cat"},
	} {
		r := b.run("", args...)
		if r.code != 2 || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, "restore") {
			t.Errorf("%s without the key file: exit %d, want 2 naming %s\n%s", args[0], r.code, path, r.stderr)
		}
		t.Logf("claimcheck %s (key file missing): exit %d\n%s", args[0], r.code, r.stderr)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a new key file was created")
	}
	if err := os.WriteFile(path, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	b.ok("work", "--kind", "count", "--until-empty", "--exec", "--", "cat")
	for _, j := range b.jobs() {
		if j.State != "completed" {
			t.Errorf("job %d after the key was restored: %s", j.ID, j.State)
		}
	}
}

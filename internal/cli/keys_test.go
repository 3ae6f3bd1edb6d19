package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
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

// TestLibraryProducerCommandWorker: a Go producer with the library's
// defaults (claimcheck.OpenStore(ctx, url, nil): no keeper, payloads
// stored plain) and a command-line worker with the command's defaults (the
// data directory's key file). The inline job completes; the offloaded
// one's first attempt fails with a configuration error whose message names
// both fixes, and it is not dead; the worker run as the message says
// (--keeper none) completes it.
func TestLibraryProducerCommandWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(b.data, "objects")), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p, err := pipeline.Open(ctx, pipeline.Config{Database: "sqlite://" + filepath.ToSlash(filepath.Join(b.data, "claimcheck.db")), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	small, err := p.Enqueue(ctx, "small", "acme", strings.NewReader("a small payload, inline and plain"), nil)
	if err != nil {
		t.Fatal(err)
	}
	large, err := p.Enqueue(ctx, "large", "acme", strings.NewReader(strings.Repeat("offloaded and plain ", 10<<10)), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()

	b.ok("work", "--kind", "small", "--until-empty", "--exec", "--", "wc", "-c")
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	var out, errOut bytes.Buffer
	code := Run(wctx, []string{"--data", b.data, "work", "--kind", "large", "--exec", "--", "wc", "-c"}, strings.NewReader(""), &out, &errOut)
	cancel()
	t.Logf("command worker with its default keeper, on a library producer's plain payload: exit %d\n%s", code, errOut.String())
	for _, want := range []string{"attempt 1 failed (config)", "stored unencrypted", "--keeper none", "claimcheck keys"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("the worker's error does not say %q", want)
		}
	}
	if strings.Contains(errOut.String(), "payload-corrupt") {
		t.Errorf("a plain payload on an encrypting worker is a configuration error, not payload-corrupt")
	}
	b.ok("--keeper", "none", "work", "--kind", "large", "--until-empty", "--exec", "--", "wc", "-c")
	for _, j := range b.jobs() {
		if want := map[int64]bool{small.JobID: true, large.JobID: true}; want[j.ID] && j.State != "completed" {
			t.Errorf("job %d (%s): %s %s", j.ID, j.Kind, j.State, j.Reason)
		}
	}
}

// TestKeyFileCreatedOnce: many callers making the key file of a fresh data
// directory at once (producers started together: the idempotency fault
// trial's eight) all get the one key it holds. A caller that lost the race
// to create the file read it before its maker had written the key (empty:
// "does not hold 32 bytes"): the file must appear with its key in it.
func TestKeyFileCreatedOnce(t *testing.T) {
	t.Parallel()
	const callers = 16
	for round := range 40 {
		data := t.TempDir()
		keys := make([][]byte, callers)
		errs := make([]error, callers)
		start := make(chan struct{})
		done := make(chan struct{})
		for i := range callers {
			go func() {
				defer func() { done <- struct{}{} }()
				<-start
				keys[i], errs[i] = localKey(data, keyFileName, nil)
			}()
		}
		close(start)
		for range callers {
			<-done
		}
		for i := range callers {
			if errs[i] != nil {
				t.Fatalf("round %d, caller %d: %v", round, i, errs[i])
			}
			if !bytes.Equal(keys[i], keys[0]) {
				t.Fatalf("round %d: callers got different keys", round)
			}
		}
		entries, err := os.ReadDir(filepath.Join(data, "keys"))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Fatalf("round %d: keys directory holds %d files, want the key file alone", round, len(entries))
		}
	}
}

// TestKeyFileMadeWhileChecked: a process that finds no key file asks what
// the deployment holds; another process started with it may meanwhile
// make the key file and record its key, so that the answer is "sealed data"
// although the key file is now there. The key in the file is used, not
// refused as missing.
func TestKeyFileMadeWhileChecked(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	var made []byte
	mayCreate := func() (string, error) {
		var err error
		made, err = createKeyFile(filepath.Join(data, "keys"), keyFilePath(data)) // the other process
		if err != nil {
			return "", err
		}
		return "its job database records key id 1", nil
	}
	key, err := localKey(data, keyFileName, mayCreate)
	if err != nil {
		t.Fatalf("the key file made during the check: %v", err)
	}
	want, err := claimcheck.DecodeLocalKey(string(made))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key, want) {
		t.Fatal("not the key the other process made")
	}
}

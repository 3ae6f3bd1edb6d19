package cli

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/testenv"
	"github.com/claimcheck/claimcheck/internal/testenv/localkms"
	"github.com/claimcheck/claimcheck/ops"
)

// kmsJob is a job as `jobs --json` shows it, with its last error.
type kmsJob struct {
	jobJSON
	Dead  bool   `json:"dead"`
	Error string `json:"error"`
}

// lineWith returns the first line of text starting with prefix, or "".
func lineWith(text, prefix string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// kmsJobs lists the jobs of kind; keeper is the deployment's --keeper (a
// data directory without a key file whose store holds sealed payloads is
// refused without it).
func (b *cliBundle) kmsJobs(keeper, kind string) []kmsJob {
	b.t.Helper()
	var js []kmsJob
	if err := json.Unmarshal([]byte(b.ok("--keeper", keeper, "jobs", "--json", "--kind", kind)), &js); err != nil {
		b.t.Fatal(err)
	}
	return js
}

// TestKeeperLocalKMSWorker: jobs checked in under a real AWS KMS key
// (local-kms, --keeper awskms://KEYID?...) whose key is then disabled fail
// their attempts as keeper-failed, the worker's report naming the key id,
// and wait (attempt given back, never dead, never payload-missing or
// payload-corrupt); once the key is enabled again the same worker
// completes them.
func TestKeeperLocalKMSWorker(t *testing.T) {
	l := localkms.New(t)
	t.Parallel()
	keyID := l.CreateKey(t)
	keeper := l.KeeperURL(keyID)
	b := setup(t)
	const kind, tenant = "kms", "acme"
	offloaded := b.submit("--keeper", keeper, "--kind", kind, "--tenant", tenant, payloadFile(t, 100<<10))
	inline := b.submit("--keeper", keeper, "--kind", kind, "--tenant", tenant, payloadFile(t, 100))
	if offloaded.Inline || !inline.Inline {
		t.Fatalf("placement: %+v %+v", offloaded, inline)
	}
	l.Disable(t, keyID)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stderr testenv.Buffer
	done := make(chan result, 1)
	go func() {
		var out strings.Builder
		code := Run(ctx, []string{"--data", b.data, "--keeper", keeper, "work", "--kind", kind, "--until-empty", "--exec", "--", "cat"},
			strings.NewReader(""), &out, &stderr)
		done <- result{out.String(), stderr.String(), code}
	}()

	// Each job's attempt fails on the disabled key: the worker reports it
	// keeper-failed, naming the key id, and the job waits (the attempt is
	// given back: unavailable infrastructure, claimcheck.RetryPolicy).
	deadline := time.Now().Add(time.Minute)
	for _, j := range []jobJSON{offloaded, inline} {
		prefix := "job " + strconv.FormatInt(j.ID, 10) + ": attempt 1 failed (keeper-failed), waiting, next try in "
		for {
			line := lineWith(stderr.String(), prefix)
			if line != "" {
				if !strings.Contains(line, keyID) {
					t.Fatalf("job %d (inline %v): the error does not name the key id %s: %s", j.ID, j.Inline, keyID, line)
				}
				for _, bad := range []string{"payload-missing", "payload-corrupt"} {
					if strings.Contains(line, bad) {
						t.Fatalf("job %d: %s: %s", j.ID, bad, line)
					}
				}
				t.Logf("key disabled, worker: %s", line)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after a minute with the key disabled, no keeper-failed attempt of job %d; worker stderr:\n%s", j.ID, stderr.String())
			}
			select {
			case r := <-done:
				t.Fatalf("work ended with the key disabled: exit %d\n%s", r.code, r.stderr)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	for _, j := range b.kmsJobs(keeper, kind) {
		if j.Dead || j.State == "completed" || j.Attempts > 1 {
			t.Fatalf("job %d with the key disabled: %s (%s), attempts %d: %s", j.ID, j.State, j.Reason, j.Attempts, j.Error)
		}
		t.Logf("key disabled, jobs: job %d (inline %v) %s, attempts %d", j.ID, j.Inline, j.State, j.Attempts)
	}

	l.Enable(t, keyID)
	enabled := time.Now()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("work --until-empty did not finish after the key was enabled again")
	}
	if r.code != 0 {
		t.Fatalf("work: exit %d\n%s", r.code, r.stderr)
	}
	for _, j := range b.kmsJobs(keeper, kind) {
		if j.State != "completed" {
			t.Errorf("job %d after the key was enabled again: %s (%s) %s", j.ID, j.State, j.Reason, j.Error)
		}
	}
	t.Logf("both jobs completed %v after the key was enabled again", time.Since(enabled).Round(time.Millisecond))
}

// TestKeeperLocalKMSDoctor: doctor with a usable KMS key passes the keeper
// check; with the key disabled, or a key id that does not exist, the
// keeper check fails as a configuration failure naming the key id.
func TestKeeperLocalKMSDoctor(t *testing.T) {
	l := localkms.New(t)
	t.Parallel()
	b := setup(t)
	keyID := l.CreateKey(t)
	code, rep := b.checks("--keeper", l.KeeperURL(keyID), "doctor")
	if code != 0 || !rep.OK {
		t.Fatalf("doctor with an enabled KMS key: exit %d, %+v", code, rep)
	}
	wantStatus(t, rep, ops.CheckKeeper, ops.StatusPass, "encrypted inline probe")

	l.Disable(t, keyID)
	for name, id := range map[string]string{"disabled key": keyID, "no such key": "00000000-0000-4000-8000-000000000000"} {
		code, rep := b.checks("--keeper", l.KeeperURL(id), "doctor")
		if code == 0 || rep.OK {
			t.Errorf("doctor with a %s: exit %d, ok %v", name, code, rep.OK)
		}
		wantStatus(t, rep, ops.CheckKeeper, ops.StatusFail, "KEEPER FAILED — a configuration failure", id)
		_, detail := rep.status(ops.CheckKeeper)
		t.Logf("doctor, %s: keeper: %s", name, detail)
		for _, other := range []string{ops.CheckStore, ops.CheckCredentials} {
			wantStatus(t, rep, other, ops.StatusPass)
		}
	}
}

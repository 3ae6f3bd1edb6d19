package sweep_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/cli"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/sweep"
)

// envHelper, when set, makes TestKilledSubmitHelper run the claimcheck
// command with the JSON-encoded arguments it holds: the test binary
// re-executed as the command, so that a real process can be killed.
const envHelper = "CLAIMCHECK_SWEEP_TEST_COMMAND"

// TestKilledSubmitHelper is not a test: it is claimcheck itself when
// envHelper is set (see killedSubmits), and does nothing otherwise.
func TestKilledSubmitHelper(t *testing.T) {
	raw := os.Getenv(envHelper)
	if raw == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(cli.Run(context.Background(), args, os.Stdin, os.Stdout, os.Stderr))
}

// litter is what killed check-ins leave: temporary files of the file
// store, incomplete multipart uploads of an S3 store, and their check-in
// intents.
type litter struct {
	tempFiles, tempBytes int64
	uploads, partBytes   int64
	intents              int64
}

func (l litter) String() string {
	return fmt.Sprintf("%d temporary files (%s), %d incomplete uploads (%s of parts), %d check-in intents",
		l.tempFiles, mib(l.tempBytes), l.uploads, mib(l.partBytes), l.intents)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// killStore is one store the killed submits run against.
type killStore struct {
	url, database string
	// objects is the file store's directory ("" for S3).
	objects string
	// client, bucket and ns: the S3 store's client, bucket and namespace
	// (prefix=) for listing its incomplete uploads with the SDK.
	client     *s3.Client
	bucket, ns string
	// unnamed counts the submits caught writing an object's file without
	// a name (file store, Linux).
	unnamed int
}

// inFlight returns a sign that a multipart upload or temporary file not
// in seen is being written (by the submit process pid, on the file
// store), and its identity, or "". On Linux the file store writes an
// object into a file without a name (O_TMPFILE) until it is complete:
// it is seen as a file of the process's that is under the store's
// directory and has no name ("<dir>/#<inode> (deleted)" in /proc).
func (k *killStore) inFlight(ctx context.Context, seen map[string]bool, pid int) (string, error) {
	if k.client == nil {
		fds := fmt.Sprintf("/proc/%d/fd", pid)
		if ents, err := os.ReadDir(fds); err == nil {
			for _, e := range ents {
				p := filepath.Join(fds, e.Name())
				target, err := os.Readlink(p)
				if err != nil || !strings.HasPrefix(target, k.objects+string(filepath.Separator)) || !strings.HasSuffix(target, " (deleted)") {
					continue
				}
				if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 && !seen[p] {
					k.unnamed++
					return p, nil
				}
			}
		}
		found := ""
		err := filepath.WalkDir(k.objects, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !claimcheck.IsTempKey(path) || seen[path] || found != "" {
				return nil
			}
			if info, err := d.Info(); err == nil && info.Size() > 0 {
				found = path
			}
			return nil
		})
		return found, err
	}
	out, err := k.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &k.bucket, Prefix: aws.String(k.ns)})
	if err != nil {
		return "", err
	}
	for _, u := range out.Uploads {
		id := aws.ToString(u.UploadId)
		if seen[id] {
			continue
		}
		// In flight once a part is up: the parts are what an abandoned
		// upload costs.
		parts, err := k.client.ListParts(ctx, &s3.ListPartsInput{Bucket: &k.bucket, Key: u.Key, UploadId: u.UploadId})
		if err == nil && len(parts.Parts) > 0 {
			return id, nil
		}
	}
	return "", nil
}

// 20 submits of a 24 MiB payload killed (SIGKILL) mid-upload on each store
// (the object's file being written on the file store: on Linux a file
// without a name, which the kernel frees with the process, so that nothing
// is left but the intents of those killed after their payload was read;
// elsewhere a temporary file; a multipart upload
// with parts up on SeaweedFS S3, in a namespace of its own), with live jobs
// pending around them (one of them as large, its multipart upload
// completed). Then a sweep with aged timestamps (the killed check-ins'
// intents backdated 48 h by the database's clock; on the file store the
// temporary files too and the real sweep command run, on S3, whose upload
// times cannot be backdated, the sweep's clock 48 h ahead): 0 temporary
// files, 0 incomplete uploads (ListMultipartUploads) and 0 check-in
// intents left, no live job's object touched, and every live job
// completes.
func TestKilledSubmitsLeaveNoLitter(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 40 processes")
	}
	t.Run("sqlite+file", func(t *testing.T) {
		dir := t.TempDir()
		objects := filepath.Join(dir, "objects")
		killedSubmits(t, &killStore{url: "file://" + filepath.ToSlash(objects), objects: objects, database: "sqlite://" + filepath.ToSlash(filepath.Join(dir, "jobs.db"))})
	})
	t.Run("postgres+s3", func(t *testing.T) {
		raw := s3URL(t)
		database := dbtest.Postgres(t)
		ctx := context.Background()
		shared, err := claimcheck.OpenStore(ctx, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer shared.Close()
		k := &killStore{database: database}
		if !shared.Bucket().As(&k.client) {
			t.Fatal("no S3 client behind the s3:// store")
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		k.bucket, k.ns = u.Host, "killed-"+hex.EncodeToString(rnd[:])+"/"
		q := u.Query()
		q.Set("prefix", k.ns)
		u.RawQuery = q.Encode()
		k.url = u.String()
		t.Cleanup(func() { emptyNamespace(t, k) })
		killedSubmits(t, k)
	})
}

// emptyNamespace aborts the uploads and deletes the objects under k's
// namespace.
func emptyNamespace(t *testing.T, k *killStore) {
	ctx := context.Background()
	ups, err := k.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &k.bucket, Prefix: aws.String(k.ns)})
	if err == nil {
		for _, u := range ups.Uploads {
			_, _ = k.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &k.bucket, Key: u.Key, UploadId: u.UploadId})
		}
	}
	p := s3.NewListObjectsV2Paginator(k.client, &s3.ListObjectsV2Input{Bucket: &k.bucket, Prefix: aws.String(k.ns)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Logf("empty namespace %s: %v", k.ns, err)
			return
		}
		for _, o := range page.Contents {
			_, _ = k.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &k.bucket, Key: o.Key})
		}
	}
}

const (
	kills       = 20
	killedSize  = 24 << 20 // five 5 MiB parts on S3
	liveSmall   = 100 << 10
	maxAttempts = 3 * kills // submits that finished before their kill count as live jobs
)

func killedSubmits(t *testing.T, k *killStore) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	data := filepath.Join(t.TempDir(), "data")
	common := []string{"--data", data, "--store", k.url, "--database", k.database, "--keeper", "none"}
	run := func(stdin io.Reader, args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := cli.Run(ctx, append(append([]string(nil), common...), args...), stdin, &out, &errOut)
		return out.String(), errOut.String(), code
	}
	var live []int64
	submitLive := func(body []byte) {
		t.Helper()
		out, errOut, code := run(bytes.NewReader(body), "--json", "submit", "--kind", "live", "--tenant", tenant, "-")
		var j struct {
			ID int64 `json:"id"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &j) != nil {
			t.Fatalf("submit a live job: exit %d\n%s%s", code, out, errOut)
		}
		live = append(live, j.ID)
	}
	submitLive(payloadBytes(1, liveSmall))
	submitLive(payloadBytes(2, killedSize)) // a completed multipart upload on S3

	seen := map[string]bool{}
	killed, finished := 0, 0
	for n := 0; killed < kills; n++ {
		if n == maxAttempts {
			t.Fatalf("only %d of %d submits were caught mid-upload (%d finished first)", killed, n, finished)
		}
		if killed == kills/2 && len(live) == 2 {
			submitLive(payloadBytes(3, liveSmall))
		}
		args, _ := json.Marshal(append(append([]string(nil), common...), "--json", "submit", "--kind", "killed", "--tenant", tenant, "-"))
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledSubmitHelper$")
		cmd.Env = append(os.Environ(), envHelper+"="+string(args))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Stdin = bytes.NewReader(payloadBytes(uint64(100+n), killedSize))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		caught := ""
	poll:
		for {
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("submit %d failed on its own: %v\n%s", n, err, out.String())
				}
				var j struct {
					ID int64 `json:"id"`
				}
				if json.Unmarshal(out.Bytes(), &j) != nil {
					t.Fatalf("submit %d: %s", n, out.String())
				}
				live = append(live, j.ID) // finished before it could be killed: a live job
				finished++
				break poll
			default:
			}
			id, err := k.inFlight(ctx, seen, cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if id != "" {
				caught = id
				_ = cmd.Process.Kill() // SIGKILL: no deferred clean-up runs
				if err := <-exited; err == nil {
					finished++ // it had just finished: the upload completed
					t.Logf("submit %d finished as it was killed", n)
				} else {
					killed++
				}
				seen[caught] = true
				break poll
			}
			time.Sleep(2 * time.Millisecond)
		}
	}

	pipe, err := pipeline.Open(ctx, pipeline.Config{Database: k.database, Store: mustOpen(t, ctx, k.url, data), SkipMigrations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Close()
	before := k.count(t, ctx, pipe)
	t.Logf("%s: %d submits killed mid-upload (%d more finished first, live); %d live jobs pending; left before the sweep: %s", name(k), killed, finished, len(live), before)
	switch {
	case k.client == nil && k.unnamed > 0:
		// Caught writing objects' files without a name: the kernel freed
		// them with the process. What is left named is other writes'
		// (fileblob's, of small files such as a start-up probe), never
		// a payload's bytes.
		if before.tempBytes >= 1<<20 {
			t.Fatalf("%d submits killed while writing an unnamed object file, and temporary files hold a payload's bytes: %s", k.unnamed, before)
		}
		t.Logf("%d of the submits were killed while writing an unnamed object file", k.unnamed)
	case k.client == nil && before.tempFiles == 0 || k.client != nil && before.uploads == 0:
		t.Fatalf("the killed submits left no litter to sweep: %s", before)
	}
	liveKeys := liveObjects(t, ctx, pipe, live)

	// Aged timestamps: the killed check-ins' intents 48 h old by the
	// database's clock, and on the file store their temporary files too.
	const aged = 48 * time.Hour
	if _, err := pipe.DB().ExecContext(ctx, `UPDATE claimcheck_intent SET recorded_ms = recorded_ms - $1`, aged.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	var removed map[sweep.Reason]int
	if k.client == nil {
		when := time.Now().Add(-aged)
		_ = filepath.WalkDir(k.objects, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && claimcheck.IsTempKey(path) {
				err = os.Chtimes(path, when, when)
			}
			return err
		})
		out, errOut, code := run(nil, "--json", "sweep")
		var rep struct {
			Summary struct {
				Removed   int                  `json:"removed"`
				RemovedBy map[sweep.Reason]int `json:"removed_by_reason"`
				ByReason  map[sweep.Reason]int `json:"by_reason"`
			} `json:"summary"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("claimcheck sweep: exit %d\n%s%s", code, out, errOut)
		}
		removed = rep.Summary.RemovedBy
		t.Logf("claimcheck --json sweep: removed %d %v, by reason %v", rep.Summary.Removed, rep.Summary.RemovedBy, rep.Summary.ByReason)
	} else {
		ahead := func() time.Time { return time.Now().Add(aged) }
		rep, err := sweep.Sweep(ctx, sweep.Options{Store: pipe.Store(), DB: pipe.DB(), Now: ahead})
		if err != nil {
			t.Fatal(err)
		}
		removed = rep.RemovedByReason
		t.Logf("sweep, clock %s ahead: removed %d (%s) %v, by reason %v", claimcheck.FormatDuration(aged), rep.Removed, mib(rep.RemovedBytes), rep.RemovedByReason, rep.ByReason)
	}
	after := k.count(t, ctx, pipe)
	t.Logf("%s: left after the sweep: %s", name(k), after)
	if after.tempFiles != 0 || after.uploads != 0 || after.intents != 0 {
		t.Errorf("after the sweep: %s; want 0 temporary files, 0 incomplete uploads and 0 check-in intents", after)
	}
	if got := int64(removed[sweep.StaleIntent]); got != before.intents {
		t.Errorf("the sweep removed the stale check-in intents of %d keys, want the %d killed check-ins'", got, before.intents)
	}
	if got, want := int64(removed[sweep.TempFile]+removed[sweep.IncompleteUpload]), before.tempFiles+before.uploads; got != want {
		t.Errorf("the sweep removed %d temporary files and incomplete uploads, want the %d there were", got, want)
	}
	if removed[sweep.Orphan]+removed[sweep.Expired] != 0 {
		t.Errorf("the sweep removed objects: %v", removed)
	}
	for id, key := range liveKeys {
		if ok, err := pipe.Store().Bucket().Exists(ctx, key); err != nil || !ok {
			t.Errorf("live job %d's object is gone after the sweep (%v)", id, err)
		}
	}

	if out, errOut, code := run(nil, "work", "--kind", "live", "--until-empty", "--exec", "--", "wc", "-c"); code != 0 {
		t.Fatalf("work the live jobs: exit %d\n%s%s", code, out, errOut)
	}
	for _, id := range live {
		j, err := pipe.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != "completed" || j.Attempts != 1 {
			t.Errorf("live job %d: %s on attempt %d (%s), want completed on attempt 1", id, j.State, j.Attempts, j.Error)
		}
	}
	t.Logf("%s: all %d live jobs completed on attempt 1", name(k), len(live))
}

func name(k *killStore) string {
	if k.client == nil {
		return "file store"
	}
	return "SeaweedFS S3 (namespace " + k.ns + ")"
}

func mustOpen(t *testing.T, ctx context.Context, raw, data string) *claimcheck.Store {
	t.Helper()
	s, err := claimcheck.OpenStore(ctx, raw, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// count measures k's litter: temporary files under the file store's
// directory and spool files in the data directory, incomplete uploads
// under the S3 namespace with their parts' bytes, and check-in intents.
func (k *killStore) count(t *testing.T, ctx context.Context, pipe *pipeline.Pipeline) litter {
	t.Helper()
	var l litter
	if k.client == nil {
		err := filepath.WalkDir(k.objects, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !claimcheck.IsTempKey(path) {
				return err
			}
			l.tempFiles++
			if info, err := d.Info(); err == nil {
				l.tempBytes += info.Size()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		in := &s3.ListMultipartUploadsInput{Bucket: &k.bucket, Prefix: aws.String(k.ns)}
		for {
			out, err := k.client.ListMultipartUploads(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range out.Uploads {
				l.uploads++
				parts, err := k.client.ListParts(ctx, &s3.ListPartsInput{Bucket: &k.bucket, Key: u.Key, UploadId: u.UploadId})
				if err == nil {
					for _, p := range parts.Parts {
						l.partBytes += aws.ToInt64(p.Size)
					}
				}
			}
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
		}
	}
	if err := pipe.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM claimcheck_intent`).Scan(&l.intents); err != nil {
		t.Fatal(err)
	}
	return l
}

// liveObjects maps each live job to its payload's object key.
func liveObjects(t *testing.T, ctx context.Context, pipe *pipeline.Pipeline, ids []int64) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, id := range ids {
		var key string
		if err := pipe.DB().QueryRowContext(ctx, `SELECT object_key FROM claimcheck_claim WHERE job_id = $1 AND role = 'payload'`, id).Scan(&key); err != nil {
			t.Fatalf("job %d's registry row: %v", id, err)
		}
		out[id] = key
	}
	return out
}

// payloadBytes is n bytes that differ for each seed (content-addressed
// keys: two submits of the same bytes would share one object).
func payloadBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	var x uint64 = seed*0x9E3779B97F4A7C15 + 1
	for i := 0; i+8 <= n; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	copy(b, strconv.FormatUint(seed, 10))
	return b
}

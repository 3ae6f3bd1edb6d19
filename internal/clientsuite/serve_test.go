package clientsuite_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/cli"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// deployment is one claimcheck deployment of a test: a data directory, a
// job database (SQLite file or PostgreSQL schema) and a file store in a
// directory of its own, so a test can look at what was stored.
type deployment struct {
	t        *testing.T
	data     string // --data
	database string // --database URL
	objects  string // the file store's directory (--store file://…)
}

// databases are the job databases the clients' tests run serve on:
// SQLite always, PostgreSQL with CLAIMCHECK_TEST_DATABASE_URL (and, under
// CI, always: dbtest.Postgres then fails for want of it).
func databases() map[string]func(testing.TB) string {
	dbs := map[string]func(testing.TB) string{"SQLite": dbtest.SQLite}
	if os.Getenv(dbtest.EnvPostgresURL) != "" || os.Getenv("CI") != "" {
		dbs["Postgres"] = dbtest.Postgres
	}
	return dbs
}

// newDeployment makes a deployment on the job database db returns and
// migrates it (serve, like the other commands that read an existing
// deployment, does not create one).
func newDeployment(t *testing.T, db func(testing.TB) string) *deployment {
	t.Helper()
	dir := t.TempDir()
	d := &deployment{t: t, data: filepath.Join(dir, "data"), database: db(t), objects: filepath.Join(dir, "objects")}
	if err := os.MkdirAll(d.objects+"-cold", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d.objects, 0o700); err != nil {
		t.Fatal(err)
	}
	d.claimcheck("", "migrate")
	return d
}

func (d *deployment) args(args ...string) []string {
	// A named store beside the default, for submits naming it (store=cold).
	return append([]string{"--data", d.data, "--database", d.database, "--store", "file://" + d.objects, "--store", "cold=file://" + d.objects + "-cold"}, args...)
}

// claimcheck runs the command in-process on the deployment and returns
// its standard output; a non-zero exit fails the test.
func (d *deployment) claimcheck(stdin string, args ...string) string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := cli.Run(ctx, d.args(args...), strings.NewReader(stdin), &out, &errOut); code != 0 {
		d.t.Fatalf("claimcheck %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String()
}

// jobs returns the deployment's jobs as `claimcheck jobs --json` lists
// them.
func (d *deployment) jobs() []map[string]any {
	d.t.Helper()
	var jobs []map[string]any
	out := d.claimcheck("", "--json", "jobs")
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		d.t.Fatalf("claimcheck jobs --json: %v\n%s", err, out)
	}
	return jobs
}

// storedObjects lists the files of the file store, relative to its root.
func (d *deployment) storedObjects() []string {
	d.t.Helper()
	var names []string
	err := filepath.WalkDir(d.objects, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(d.objects, path)
		names = append(names, rel)
		return nil
	})
	if err != nil {
		d.t.Fatal(err)
	}
	return names
}

// serveURL matches the address serve prints it listens on.
var serveURL = regexp.MustCompile(`https?://[0-9.:\[\]a-z]+`)

// serve starts `claimcheck serve` in-process on a free loopback port and
// returns its base URL (http://127.0.0.1:PORT). It is stopped, and must
// exit 0, when the test ends; what it logged is in the test's log if the
// test fails.
func (d *deployment) serve(args ...string) string {
	t := d.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	logs := &testenv.Buffer{}
	go func() {
		done <- cli.Run(ctx, d.args(append(args, "serve", "--addr", "127.0.0.1:0")...), strings.NewReader(""), pw, logs)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, logs.String())
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	})
	br := bufio.NewReader(pr)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			cancel()
			<-done
			t.Fatalf("serve printed no address: %v (%s)", err, logs.String())
		}
		if u := serveURL.FindString(line); u != "" {
			go io.Copy(io.Discard, br)
			return u
		}
	}
}

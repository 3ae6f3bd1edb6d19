package cli

import (
	"encoding/json"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// tree lists every path under root, for comparing a directory before and
// after a command.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestRefusalsCreateNothing: a command refused for bad configuration or
// bad input exits with its status, leads its message with the cause, and
// leaves the file system as it was: no data directory, no SQLite file, no
// store directory, no key file.
func TestRefusalsCreateNothing(t *testing.T) {
	root := t.TempDir()
	empty := filepath.Join(root, "empty.pdf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data") // never made
	submit := []string{"submit", "--kind", "pdf-info", "--tenant", "acme"}
	cases := []struct {
		name string
		args []string
		code int
		want string // the message's cause, which must come first
		pg   bool   // needs CLAIMCHECK_TEST_DATABASE_URL
		s3   bool   // needs CLAIMCHECK_TEST_S3_URL, put in args[1]
		env  map[string]string
	}{
		{"unknown store scheme", append([]string{"--store", "s3x://bucket"}, append(submit, "-")...), 2, "s3x", false, false, nil},
		{"file store under a missing parent", append([]string{"--store", "file://" + filepath.Join(root, "nonexistent", "objects")}, append(submit, "-")...), 2, "does not exist", false, false, nil},
		{"unreachable PostgreSQL", append([]string{"--database", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"}, append(submit, "-")...), 1, "connection refused", false, false, nil},
		{"missing input file", append(submit, filepath.Join(root, "nope.pdf")), 2, "no such file", false, false, nil},
		{"0-byte input file", append(submit, empty), 2, "payload is empty", false, false, nil},
		{"forgotten -- before an --exec command", []string{"work", "--kind", "count", "--exec", "wc", "-c"}, 2, "put -- before the command", false, false, nil},
		{"0-byte standard input", append(submit, "-"), 2, "payload is empty", false, false, nil},
		{"missing bucket", append([]string{"--store", "%s"}, append(submit, "-")...), 2, "does not exist", false, true, nil},
		{"missing credentials", append([]string{"--store", "%s"}, append(submit, "-")...), 2, "no AWS credentials", false, true,
			map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true"}},
		{"unknown broker scheme", append([]string{"--broker", "mqtt://127.0.0.1:1"}, append(submit, "-")...), 2, "mqtt", false, false, nil},
		{"format=aws on a store that seals", append([]string{"--broker", "sqs://?queue_url=http://127.0.0.1:1/q&dead_letter_queue_url=http://127.0.0.1:1/d&region=us-east-1&format=aws&pointer_bucket=b"}, append(submit, "-")...), 2, "format=aws", false, false, nil},
		{"role that does not exist", append([]string{"--database", "postgres://nosuchuser@127.0.0.1:5432/postgres?sslmode=disable"}, append(submit, "-")...), 0, "nosuchuser", true, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.pg {
				testenv.Require(t, dbtest.EnvPostgresURL, "a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/claimcheck_test?sslmode=disable")
			}
			if c.s3 {
				s3URL := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", `scripts/seaweedfs.sh build && scripts/seaweedfs.sh start && eval "$(scripts/seaweedfs.sh env)"`)
				if c.name == "missing bucket" {
					u, err := url.Parse(s3URL)
					if err != nil {
						t.Fatal(err)
					}
					u.Host = "claimcheck-no-such-bucket"
					s3URL = u.String()
				}
				c.args = slices.Clone(c.args)
				c.args[1] = s3URL
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			before := tree(t, root)
			b := &cliBundle{t: t, data: data}
			stdin := "%PDF-1.4 stand-in" // a payload, so that the configuration is what is refused
			if strings.Contains(c.name, "0-byte standard input") {
				stdin = ""
			}
			r := b.run(stdin, c.args...)
			if c.code != 0 && r.code != c.code || r.code == 0 {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, c.code, r.stderr)
			}
			msg := strings.TrimPrefix(strings.TrimSpace(r.stderr), "claimcheck: ")
			if i := strings.Index(msg, c.want); i < 0 || strings.Contains(msg[:i], "key file") {
				t.Errorf("stderr %q: want the cause %q first", r.stderr, c.want)
			}
			if after := tree(t, root); !slices.Equal(before, after) {
				t.Errorf("the refused command changed the file system:\nbefore %q\nafter  %q", before, after)
			}
		})
	}

	// A read-only command on a new host of a PostgreSQL deployment needs
	// no data directory and makes none.
	t.Run("jobs on a new host", func(t *testing.T) {
		testenv.Require(t, dbtest.EnvPostgresURL, "a PostgreSQL server, e.g. postgres://postgres@127.0.0.1:5432/claimcheck_test?sslmode=disable")
		db := dbtest.Postgres(t)
		store := filepath.Join(t.TempDir(), "objects")
		producer := &cliBundle{t: t, data: filepath.Join(t.TempDir(), "producer")}
		producer.ok("--database", db, "--store", "file://"+store, "--keeper", "none", "submit", "--kind", "x1", "--tenant", "acme", filepath.Join(corpusPath, "pixel.pdf"))
		before := tree(t, root)
		r := (&cliBundle{t: t, data: data}).run("", "--database", db, "--store", "file://"+store, "--keeper", "none", "jobs")
		if r.code != 0 || !strings.Contains(r.stdout, "x1") {
			t.Errorf("jobs on a new host: exit %d, stdout %q, stderr %q; want the one job listed", r.code, r.stdout, r.stderr)
		}
		if after := tree(t, root); !slices.Equal(before, after) {
			t.Errorf("jobs changed the file system:\nbefore %q\nafter  %q", before, after)
		}
		// Without --store, the store would be the missing data
		// directory's: the refusal says to name the deployment's.
		r = (&cliBundle{t: t, data: data}).run("", "--database", db, "--keeper", "none", "jobs")
		if r.code != 1 || !strings.Contains(r.stderr, "give the deployment's --store too") {
			t.Errorf("jobs on a new host without --store: exit %d, stderr %q; want 1 and the --store hint", r.code, r.stderr)
		}
		if after := tree(t, root); !slices.Equal(before, after) {
			t.Errorf("jobs without --store changed the file system:\nbefore %q\nafter  %q", before, after)
		}
	})
}

// TestJSONErrors: under --json a refusal is one JSON object on standard
// error with the message, the reason class and the exit status.
func TestJSONErrors(t *testing.T) {
	b := setup(t)
	r := b.run("", "--json", "submit", "--kind", "pdf-info", "--tenant", "acme", filepath.Join(t.TempDir(), "nope.pdf"))
	var got struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
		Exit   int    `json:"exit"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &got); err != nil || r.code != 2 || got.Exit != 2 || got.Reason != "config" || !strings.Contains(got.Error, "no such file") {
		t.Errorf("--json refusal: exit %d, stderr %q (%v); want a JSON object naming the missing file, exit 2", r.code, r.stderr, err)
	}
}

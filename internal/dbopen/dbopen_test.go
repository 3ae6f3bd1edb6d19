package dbopen

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		dialect Dialect
		path    string
	}{
		{"/abs/jobs.db", SQLite, "/abs/jobs.db"},
		{"rel/jobs.db", SQLite, "rel/jobs.db"},
		{"sqlite:///abs/jobs.db", SQLite, "/abs/jobs.db"},
		{"sqlite://rel.db", SQLite, "rel.db"},
		{"postgres://u@127.0.0.1:5432/db?sslmode=disable", Postgres, ""},
		{"postgresql://u:pw@host/db", Postgres, ""},
		{"POSTGRES://host/db", Postgres, ""},
	} {
		got, err := Parse(tc.in)
		if err != nil || got.Dialect != tc.dialect || got.Path != tc.path {
			t.Errorf("Parse(%q) = %+v, %v; want dialect %s path %q", tc.in, got, err, tc.dialect, tc.path)
		}
		if tc.dialect == Postgres && !strings.EqualFold(got.URL, tc.in) {
			t.Errorf("Parse(%q).URL = %q", tc.in, got.URL)
		}
	}
	for _, in := range []string{"", "sqlite://", "mysql://host/db", "postgres://u:secret@[::1/db", "postgres://host/db?sslmode=bogus"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", in, got)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q): error %q reveals the password", in, err)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:secret@host:5432/db?sslmode=disable": "postgres://u:xxxxx@host:5432/db?sslmode=disable",
		"postgres://u@host/db":                             "postgres://u@host/db",
		"postgres://host/db?password=secret":               "postgres://host/db?password=xxxxx",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Redact("postgres://u:secret@[::1/db"); strings.Contains(got, "secret") {
		t.Errorf("Redact of an unparsable URL = %q", got)
	}
}

package pipelinetest_test

import (
	"database/sql"
	"net/url"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"

	"github.com/claimcheck/claimcheck/pipeline/pipelinetest"
)

// PostgresDatabase gives each test a schema of its own, and drops it.
func TestPostgresDatabaseIsolated(t *testing.T) {
	base := pipelinetest.PostgresURL(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	var schemas []string
	for range 2 {
		t.Run("Inner", func(t *testing.T) {
			u := pipelinetest.PostgresDatabase(t)
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			schema := pu.Query().Get("search_path")
			if !strings.HasPrefix(schema, "claimcheck_t_") {
				t.Fatalf("URL %s: search_path %q, want a claimcheck_t_ schema", u, schema)
			}
			db, err := sql.Open("pgx", u)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var current string
			if err := db.QueryRowContext(t.Context(), `SELECT current_schema()`).Scan(&current); err != nil || current != schema {
				t.Fatalf("current_schema() = %q (%v), want %q", current, err, schema)
			}
			// An unqualified table lands in the test's schema.
			if _, err := db.ExecContext(t.Context(), `CREATE TABLE isolated (x int)`); err != nil {
				t.Fatalf("create table (a second test would collide if schemas were shared): %v", err)
			}
			schemas = append(schemas, schema)
		})
	}
	if len(schemas) != 2 || schemas[0] == schemas[1] {
		t.Fatalf("schemas %v, want two different ones", schemas)
	}
	for _, s := range schemas {
		var n int
		if err := admin.QueryRowContext(t.Context(), `SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, s).Scan(&n); err != nil || n != 0 {
			t.Fatalf("schema %s: %d left after its test (%v), want dropped", s, n, err)
		}
	}
}

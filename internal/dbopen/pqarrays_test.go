package dbopen

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"

	"github.com/claimcheck/claimcheck/internal/testenv"
)

// TestPQArraysEncodeAsPQ: the pq arrays River's database/sql driver passes
// reach PostgreSQL as the same values through encodePQArrays as through
// their own text encoding (a pool without it), for strings that need
// quoting and escaping, empty and nil slices, nil pointers and a nil bytea element.
func TestPQArraysEncodeAsPQ(t *testing.T) {
	base := testenv.Require(t, "CLAIMCHECK_TEST_DATABASE_URL", "a PostgreSQL URL such as postgres://postgres@127.0.0.1:5432/claimcheck_test?sslmode=disable")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := Open(ctx, mustParse(t, base), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	plain := stdlib.OpenDB(*cfg)
	defer plain.Close()

	args := `{"kind":"docs","ticket":{"inline":"q\"uo\\te{d},","dek":"é✓ \t\n"}}`
	cases := []struct {
		name string
		v    any
		cast string
	}{
		{"strings", pq.Array([]string{args, "", "NULL", "a,b", `"`, `\`, "{}"}), "text[]"},
		{"no strings", pq.Array([]string{}), "text[]"},
		{"nil strings", pq.Array([]string(nil)), "text[]"},
		{"int64s", pq.Array([]int64{0, -1, 1 << 62}), "bigint[]"},
		{"nil int64s", pq.Array([]int64(nil)), "bigint[]"},
		{"int32s", pq.Array([]int32{7, -7}), "integer[]"},
		{"byteas", pq.Array([][]byte{nil, {}, {0, 1, 0xff}, []byte(args)}), "bytea[]"},
		{"nil byteas", pq.Array([][]byte(nil)), "bytea[]"},
		{"bools", pq.Array([]bool{true, false}), "boolean[]"},
		{"nil bools", pq.Array([]bool(nil)), "boolean[]"},
		{"a StringArray", pq.StringArray{"x", "y"}, "text[]"},
		{"a nil *StringArray", (*pq.StringArray)(nil), "text[]"},
		{"a nil *Int64Array", (*pq.Int64Array)(nil), "bigint[]"},
		{"a nil *ByteaArray", (*pq.ByteaArray)(nil), "bytea[]"},
	}
	query := func(db *sql.DB, v any, cast string) (sql.NullString, error) {
		var s sql.NullString
		err := db.QueryRowContext(ctx, "SELECT $1::"+cast+"::text", v).Scan(&s)
		return s, err
	}
	for _, c := range cases {
		want, err := query(plain, c.v, c.cast)
		if err != nil {
			t.Fatalf("%s through pq's encoding: %v", c.name, err)
		}
		got, err := query(db, c.v, c.cast)
		if err != nil {
			t.Fatalf("%s through encodePQArrays: %v", c.name, err)
		}
		if got != want {
			t.Errorf("%s: PostgreSQL read %+v through encodePQArrays, %+v through pq's encoding", c.name, got, want)
		}
		if _, _, ok := tryWrapPQArray(c.v); !ok {
			t.Errorf("%s (%T): not encoded by encodePQArrays", c.name, c.v)
		}
	}
}

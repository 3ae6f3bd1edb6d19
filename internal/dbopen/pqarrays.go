package dbopen

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/lib/pq"
)

// River's database/sql driver passes its array parameters (a job's
// arguments and metadata, ids, states, update flags, …) as lib/pq arrays (pq.Array),
// which pgx's database/sql driver encodes through their driver.Valuer:
// the array formatted as text, a binary encode of that text that fails
// (its error quotes the whole text, a job's arguments among it), the text
// parsed back, then encoded. That was a quarter of a small job's enqueue
// CPU on PostgreSQL. encodePQArrays hands pgx the slice inside instead,
// which it encodes directly: the same values (a nil slice is NULL either
// way; a nil element of a pq.ByteaArray is an empty bytea, as pq sends
// it).
func encodePQArrays(_ context.Context, c *pgx.Conn) error {
	m := c.TypeMap()
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapPQArray}, m.TryWrapEncodePlanFuncs...)
	return nil
}

// pqArrayPlan encodes a pq array as the slice conv returns.
type pqArrayPlan struct {
	next pgtype.EncodePlan
	conv func(any) any
}

func (p *pqArrayPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *pqArrayPlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(p.conv(value), buf)
}

// tryWrapPQArray is a pgtype.TryWrapEncodePlanFunc for the pq array types
// River uses; any other value is left to pgx's own plans.
func tryWrapPQArray(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	var conv func(any) any
	switch value.(type) {
	case *pq.StringArray:
		conv = func(v any) any { return []string(deref(v.(*pq.StringArray))) }
	case pq.StringArray:
		conv = func(v any) any { return []string(v.(pq.StringArray)) }
	case *pq.Int64Array:
		conv = func(v any) any { return []int64(deref(v.(*pq.Int64Array))) }
	case pq.Int64Array:
		conv = func(v any) any { return []int64(v.(pq.Int64Array)) }
	case *pq.Int32Array:
		conv = func(v any) any { return []int32(deref(v.(*pq.Int32Array))) }
	case pq.Int32Array:
		conv = func(v any) any { return []int32(v.(pq.Int32Array)) }
	case *pq.BoolArray:
		conv = func(v any) any { return []bool(deref(v.(*pq.BoolArray))) }
	case pq.BoolArray:
		conv = func(v any) any { return []bool(v.(pq.BoolArray)) }
	case *pq.ByteaArray:
		conv = func(v any) any { return byteaElems(deref(v.(*pq.ByteaArray))) }
	case pq.ByteaArray:
		conv = func(v any) any { return byteaElems(v.(pq.ByteaArray)) }
	default:
		return nil, nil, false
	}
	return &pqArrayPlan{conv: conv}, conv(value), true
}

// deref is *p, or the zero value (a nil slice: NULL, as database/sql
// sends a nil pointer to a driver.Valuer) when p is nil. pgx reuses a
// plan for every value of the type, nil pointers among them.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// byteaElems is a as pq sends it: nil stays NULL, a nil element becomes an
// empty bytea (pgx would send it as NULL).
func byteaElems(a pq.ByteaArray) [][]byte {
	var out [][]byte
	for i, e := range a {
		if e == nil {
			if out == nil {
				out = slices.Clone([][]byte(a))
			}
			out[i] = []byte{}
		}
	}
	if out == nil {
		return a
	}
	return out
}

package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/claimcheck/claimcheck"
)

// BenchmarkDecodeArgs is a worker's decode of a job's arguments with an
// inline ticket, as PostgreSQL's jsonb returns them: as WorkArgs (the
// ticket decoded in the same pass, then Check) against Args (the ticket
// kept as json.RawMessage, then ParseTicket), the way the worker did
// before.
func BenchmarkDecodeArgs(b *testing.B) {
	decoders := []struct {
		name   string
		decode func(enc []byte) (*claimcheck.Ticket, error)
	}{
		{"WorkArgs", func(enc []byte) (*claimcheck.Ticket, error) {
			var a WorkArgs
			if err := json.Unmarshal(enc, &a); err != nil {
				return nil, err
			}
			return a.ParseTicket()
		}},
		{"Args+ParseTicket", func(enc []byte) (*claimcheck.Ticket, error) {
			var a Args
			if err := json.Unmarshal(enc, &a); err != nil {
				return nil, err
			}
			return claimcheck.ParseTicket(a.Ticket)
		}},
	}
	for _, size := range []int{4 << 10, 40 << 10} {
		enc := inlineArgs(b, size)
		for _, d := range decoders {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, d.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.decode(enc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestWorkArgsDecodeAsArgs: WorkArgs and Args read the same arguments
// alike, the ticket included.
func TestWorkArgsDecodeAsArgs(t *testing.T) {
	enc := inlineArgs(t, 1000)
	var w WorkArgs
	var a Args
	if err := json.Unmarshal(enc, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(enc, &a); err != nil {
		t.Fatal(err)
	}
	got, err := w.ParseTicket()
	if err != nil {
		t.Fatal(err)
	}
	want, err := claimcheck.ParseTicket(a.Ticket)
	if err != nil {
		t.Fatal(err)
	}
	if w.JobKind != a.JobKind || w.Tenant != a.Tenant || w.IdempotencyKey != a.IdempotencyKey || w.Kind() != a.Kind() {
		t.Errorf("WorkArgs %+v, Args %+v", w, a)
	}
	g, _ := got.Marshal()
	h, _ := want.Marshal()
	if !bytes.Equal(g, h) {
		t.Errorf("ticket decoded with the arguments:\n%s\nparsed:\n%s", g, h)
	}
}

// inlineArgs are the arguments of a job whose payload of size random
// bytes is inline in its ticket, spaced as jsonb returns them.
func inlineArgs(tb testing.TB, size int) []byte {
	tb.Helper()
	st, err := claimcheck.OpenStore(context.Background(), "mem://", nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	p := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	tk, err := st.CheckIn(context.Background(), "acme", bytes.NewReader(p), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if !tk.IsInline() {
		tb.Fatalf("a payload of %d bytes was not inline", size)
	}
	enc, err := json.Marshal(InsertArgs{JobKind: "docs", Tenant: "acme", Ticket: tk})
	if err != nil {
		tb.Fatal(err)
	}
	enc = bytes.ReplaceAll(enc, []byte(`":`), []byte(`": `))
	return bytes.ReplaceAll(enc, []byte(`,"`), []byte(`, "`))
}

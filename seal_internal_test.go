package claimcheck

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzSealFormat feeds sealFormat, the parser of a sealed object's format
// marker (object metadata, outside input), any value: only an absent entry
// is v1 and only exactly "2" is v2; anything else is ErrConfig and never a
// format. The associated data of the two formats never coincide.
func FuzzSealFormat(f *testing.F) {
	for _, v := range []string{"2", "1", "", "3", "v2", " 2", "2\x00", "２"} {
		f.Add(v, true, "acme", "payloads/acme/00/00")
	}
	f.Add("", false, "acme", "")
	f.Fuzz(func(t *testing.T, v string, present bool, tenant, key string) {
		meta := map[string]string{metaDEK: "x"}
		if present {
			meta[metaSeal] = v
		}
		format, err := sealFormat(meta)
		switch {
		case !present:
			if format != 1 || err != nil {
				t.Fatalf("no marker: format %d, %v; want 1", format, err)
			}
		case v == sealV2:
			if format != 2 || err != nil {
				t.Fatalf("marker %q: format %d, %v; want 2", v, format, err)
			}
		default:
			if err == nil || !errors.Is(err, ErrConfig) || format != 0 {
				t.Fatalf("marker %q: format %d, %v; want ErrConfig", v, format, err)
			}
		}
		if bytes.Equal(objectAD(1, tenant, key), objectAD(2, tenant, key)) {
			t.Fatalf("v1 and v2 associated data coincide for %q, %q", tenant, key)
		}
	})
}

package temporal

import (
	"io"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"
)

// The stored form is a protobuf encoding of the payload: proto.Unmarshal
// reads what encodePayload writes, and decodePayload reads what
// proto.Marshal writes, with equal results.
func FuzzDecodePayload(f *testing.F) {
	seed := func(p *commonpb.Payload) {
		b, err := proto.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&commonpb.Payload{})
	seed(&commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"a":1}`)})
	seed(&commonpb.Payload{Data: make([]byte, 300), ExternalPayloads: []*commonpb.Payload_ExternalPayloadDetails{{SizeBytes: 7}}})
	f.Add([]byte{0x12, 0x05, 'a'}) // data field, truncated
	f.Add([]byte{0x10, 0x01})      // data field number, wrong wire type
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &commonpb.Payload{}
		wantErr := proto.Unmarshal(b, want)
		got, err := decodePayload(b)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("decodePayload error %v, proto.Unmarshal error %v", err, wantErr)
		}
		if err != nil {
			return
		}
		if !proto.Equal(got, want) {
			t.Fatalf("decodePayload = %v, proto.Unmarshal = %v", got, want)
		}
		r, err := encodePayload(got)
		if err != nil {
			t.Fatalf("encodePayload: %v", err)
		}
		enc, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		again := &commonpb.Payload{}
		if err := proto.Unmarshal(enc, again); err != nil || !proto.Equal(again, want) {
			t.Fatalf("proto.Unmarshal(encodePayload(p)) = %v, %v; want %v", again, err, want)
		}
		if int64(len(enc)) != int64(proto.Size(got)) {
			t.Errorf("encodePayload wrote %d bytes, proto.Size says %d", len(enc), proto.Size(got))
		}
	})
}

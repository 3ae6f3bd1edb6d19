package sqs

import (
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// markerKept publishes an AWS payload pointer under each marker name,
// receives it, dead-letters it and reads the dead letter: the marker
// arrives with SQS data type Number every time, as the AWS clients write
// it, and the other attributes stay Strings.
func markerKept(t *testing.T, tr *Transport) {
	ctx := t.Context()
	tk := &claimcheck.Ticket{Version: claimcheck.TicketVersion, Tenant: "acme", Store: "default", Key: "payloads/acme/pointer/" + strings.Repeat("0f", 16),
		SHA256: strings.Repeat("ab", 32), Size: 307200, Created: time.Now().UTC()}
	for _, marker := range []string{broker.AttrPayloadSize, broker.AttrLegacyPayloadSize} {
		p := &broker.Pointer{Bucket: "b", Key: tk.Key, Size: tk.Size, SHA256: tk.SHA256, Tenant: tk.Tenant, Marker: marker}
		m, err := p.Message(map[string]string{broker.AttrKind: "pdf"})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Publish(ctx, []broker.Message{m}); err != nil {
			t.Fatal(err)
		}
		check := func(where string, d *broker.Delivery) {
			t.Helper()
			if d.Attributes[marker] != "307200" || d.AttributeType(marker) != broker.AttrNumber {
				t.Fatalf("%s: marker %s = %q of type %s, want 307200 of type Number (types %v)", where, marker, d.Attributes[marker], d.AttributeType(marker), d.Types)
			}
			for k := range d.Attributes {
				if k != marker && d.AttributeType(k) != "String" {
					t.Fatalf("%s: attribute %s of type %s", where, k, d.AttributeType(k))
				}
			}
			if _, err := broker.ParsePointer(d.Body, d.Attributes); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		}
		ds, err := tr.Receive(ctx, 1)
		if err != nil || len(ds) != 1 {
			t.Fatalf("receive: %d, %v", len(ds), err)
		}
		check("received", ds[0])
		if err := tr.DeadLetter(ctx, ds[0], "ticket-invalid"); err != nil {
			t.Fatal(err)
		}
		dead, err := tr.ReceiveDead(ctx, 1)
		if err != nil || len(dead) != 1 {
			t.Fatalf("receive dead: %d, %v", len(dead), err)
		}
		check("dead letter", dead[0])
		t.Logf("%s: Number on the queue and on the dead letter (reason %s)", marker, dead[0].Attributes[broker.AttrReason])
		if err := tr.Ack(ctx, dead[0]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPointerMarkerNumberAgainstStandIn(t *testing.T) {
	tr, _ := openStandIn(t, 0)
	markerKept(t, tr)
}

func TestPointerMarkerNumberAgainstFauxqs(t *testing.T) {
	tr := openFauxqs(t, fauxqsClient(t), 0, Options{})
	markerKept(t, tr)
}

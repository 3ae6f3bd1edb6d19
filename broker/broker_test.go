package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
)

func TestSize(t *testing.T) {
	m := Message{Body: []byte("héllo"), Attributes: map[string]string{"k": "vé", AttrKind: "pdf"}}
	want := int64(len("héllo")) + int64(1+6+len("vé")) + int64(len(AttrKind)+6+3)
	if got := Size(m); got != want {
		t.Fatalf("Size = %d, want %d", got, want)
	}
	if Size(Message{}) != 0 {
		t.Fatal("empty message has a size")
	}
	if err := CheckSize([]Message{m}, want); err != nil {
		t.Fatalf("exact fit: %v", err)
	}
	if err := CheckSize([]Message{{}, m}, want-1); !errors.Is(err, ErrMessageTooLarge) || !strings.Contains(err.Error(), "#1") {
		t.Fatalf("one byte over: %v", err)
	}
}

func TestNewMessage(t *testing.T) {
	tk := &claimcheck.Ticket{Version: 1, Tenant: "acme", SHA256: strings.Repeat("0", 64), Size: 0, Created: time.Now().UTC()}
	m, err := NewMessage("pdf", tk)
	if err != nil {
		t.Fatal(err)
	}
	if m.Attributes[AttrKind] != "pdf" || m.Attributes[AttrTenant] != "acme" {
		t.Fatalf("attributes %v", m.Attributes)
	}
	back, err := claimcheck.ParseTicket(m.Body)
	if err != nil || back.Tenant != "acme" {
		t.Fatalf("body does not parse back: %v", err)
	}
	if _, err := NewMessage("", tk); !errors.Is(err, claimcheck.ErrConfig) {
		t.Fatalf("empty kind: %v", err)
	}
}

func TestPublishError(t *testing.T) {
	cause := errors.New("nacked")
	e := &PublishError{Failed: map[int]error{3: cause, 1: cause}, Total: 5}
	if !strings.Contains(e.Error(), "2 of 5") || !strings.Contains(e.Error(), "#1") || !strings.Contains(e.Error(), "#3") {
		t.Fatalf("message %q", e.Error())
	}
	if !errors.Is(e, cause) {
		t.Fatal("errors.Is does not see the cause")
	}
}

type sizeOnly struct {
	Transport
	max int64
}

func (s sizeOnly) MaxMessageSize() int64 { return s.max }

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	store, err := claimcheck.OpenStore(t.Context(), "file://"+dir+"/o", &claimcheck.Options{SpoolDir: dir + "/s", InlineThreshold: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	worst := claimcheck.InlineTicketSize(64<<10) + MaxMessageOverhead("pdf")
	if err := CheckConfig(store, sizeOnly{max: worst}, "pdf"); err != nil {
		t.Fatalf("exact fit: %v", err)
	}
	if err := CheckConfig(store, sizeOnly{max: worst - 1}, "pdf"); !errors.Is(err, claimcheck.ErrConfig) {
		t.Fatalf("one byte short: %v", err)
	}
}

func TestBinding(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"amqp://guest:secret@127.0.0.1:5672/?queue=jobs&prefetch=4", "amqp://127.0.0.1:5672/?queue=jobs"},
		{"amqp://guest:secret@127.0.0.1/?queue=jobs", "amqp://127.0.0.1:5672/?queue=jobs"},
		{"AMQP://HOST/vhost?heartbeat=10s", "amqp://host:5672/vhost"},
		{"nats://127.0.0.1:4222?stream=S&consumer=c&ack_wait=1m", "nats://127.0.0.1:4222/?stream=S"},
		{"nats://u:p@127.0.0.1", "nats://127.0.0.1:4222/"},
		{"sqs://?queue_url=https://sqs.eu-west-1.amazonaws.com/1/jobs&dead_letter_queue_url=https://sqs.eu-west-1.amazonaws.com/1/dlq",
			"sqs:///?dead_letter_queue_url=https%3A%2F%2Fsqs.eu-west-1.amazonaws.com%2F1%2Fdlq&queue_url=https%3A%2F%2Fsqs.eu-west-1.amazonaws.com%2F1%2Fjobs"},
		{"sqs://?queue_url=http://key:secret@127.0.0.1:3000/q", "sqs:///?queue_url=http%3A%2F%2F127.0.0.1%3A3000%2Fq"},
	} {
		got, err := Binding(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Binding(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("Binding(%q) = %q keeps a secret", tc.in, got)
		}
	}
	if _, err := Binding("no scheme"); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("Binding of a non-URL: %v, want ErrConfig", err)
	}
}

// A message too large for its transport is refused for good by the one
// classifier: the relay dead-letters it instead of publishing it again.
func TestMessageTooLargeIsPermanent(t *testing.T) {
	err := CheckSize([]Message{{Body: make([]byte, 100)}}, 10)
	if !errors.Is(err, ErrMessageTooLarge) || claimcheck.Classify(err) != claimcheck.FailurePermanent || !claimcheck.Refused(err) {
		t.Fatalf("CheckSize over the limit: %v (class %v), want ErrMessageTooLarge, permanent", err, claimcheck.Classify(err))
	}
}

package natsjs

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
)

func TestURLOptionsOffline(t *testing.T) {
	u, err := url.Parse("nats://h:4222/?stream=S1&subject=a.b&consumer=c-1&max_message_size=1000&max_deliver=-1&ack_wait=90s&duplicate_window=1m")
	if err != nil {
		t.Fatal(err)
	}
	o, err := urlOptions(u)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Stream: "S1", Subject: "a.b", Consumer: "c-1", MaxMessageSize: 1000, MaxDeliver: -1, AckWait: 90 * time.Second, DuplicateWindow: time.Minute}
	if o != want {
		t.Errorf("options %+v, want %+v", o, want)
	}
	u, _ = url.Parse("nats://h:4222")
	if o, err := urlOptions(u); err != nil || o != (Options{Stream: "CLAIMCHECK", Subject: "claimcheck.jobs", Consumer: "claimcheck"}) {
		t.Errorf("defaults: %+v %v", o, err)
	}

	for _, c := range []struct{ query, name string }{
		{"bogus=1", "bogus"},
		{"stream=a.b", "stream"},
		{"stream=", "stream"},
		{"consumer=a%20b", "consumer"},
		{"subject=x.*", "subject"},
		{"subject=x..y", "subject"},
		{"max_message_size=0", "max_message_size"},
		{"max_message_size=1k", "max_message_size"},
		{"max_deliver=0", "max_deliver"},
		{"max_deliver=-2", "max_deliver"},
		{"max_deliver=x", "max_deliver"},
		{"ack_wait=30", "ack_wait"},
		{"ack_wait=-1s", "ack_wait"},
		{"duplicate_window=0s", "duplicate_window"},
		{"stream=A&stream=B", "stream"},
	} {
		u, err := url.Parse("nats://h:4222/?" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		_, err = urlOptions(u)
		if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v, want ErrConfig naming %s", c.query, err, c.name)
		}
	}
	u, _ = url.Parse("nats:///?stream=A")
	if _, err := urlOptions(u); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("no host: %v, want ErrConfig", err)
	}
}

func TestScrubOffline(t *testing.T) {
	for _, c := range []struct {
		servers string
		secrets []string
	}{
		{"nats://alice:pa55word@h:4222", []string{"pa55word"}},
		{"alice:pa55word@h:4222", []string{"pa55word"}},
		{"nats://t0ken@h:4222,nats://bob:pw%2Fx@h2:4222", []string{"t0ken", "pw%2Fx", "pw/x"}},
		{"nats://h:4222", nil},
	} {
		got := urlSecrets(c.servers)
		for _, s := range c.secrets {
			found := false
			for _, g := range got {
				found = found || g == s
			}
			if !found {
				t.Errorf("urlSecrets(%q) = %q, missing %q", c.servers, got, s)
			}
		}
		if len(c.secrets) == 0 && len(got) != 0 {
			t.Errorf("urlSecrets(%q) = %q, want none", c.servers, got)
		}
	}
	base := errors.New(`parse "nats://alice:pa55word@h": bad`)
	err := scrub(unavailable(base), urlSecrets("nats://alice:pa55word@h"))
	if strings.Contains(err.Error(), "pa55word") || !errors.Is(err, base) || !errors.Is(err, claimcheck.ErrUnavailable) {
		t.Errorf("scrub: %q", err)
	}
}

func TestDefaultSubjectOffline(t *testing.T) {
	for stream, want := range map[string]string{
		"CLAIMCHECK": "claimcheck.jobs",
		"NC_Y":       "claimcheck.NC_Y.jobs",
		"jobs":       "claimcheck.jobs.jobs",
		"dead":       "claimcheck.dead.jobs",
		"a-b_c9":     "claimcheck.a-b_c9.jobs",
		"a.b*c >":    "claimcheck.a_b_c__.jobs",
		"":           "claimcheck._.jobs",
	} {
		if got := DefaultSubject(stream); got != want {
			t.Errorf("DefaultSubject(%q) = %q, want %q", stream, got, want)
		}
		if !validSubject(DefaultSubject(stream)) {
			t.Errorf("DefaultSubject(%q) is not a valid subject", stream)
		}
	}
	u, _ := url.Parse("nats://h:4222/?stream=NC_Y")
	if o, err := urlOptions(u); err != nil || o.Subject != "claimcheck.NC_Y.jobs" {
		t.Errorf("stream=NC_Y: subject %q, %v", o.Subject, err)
	}
	u, _ = url.Parse("nats://h:4222/?stream=NC_Y&subject=nc.y")
	if o, err := urlOptions(u); err != nil || o.Subject != "nc.y" {
		t.Errorf("explicit subject: %q, %v", o.Subject, err)
	}
}

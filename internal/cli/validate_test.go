package cli

import (
	"errors"
	"testing"
)

// TestOptionsValidate checks, for every subcommand with flags of its own,
// that its options' Validate accepts good values and refuses one bad value
// with a usage error (exit status 2), before anything is opened.
func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	g := &globals{maxAttempts: 5}
	withBroker := &globals{maxAttempts: 5, brokerURL: "amqp://guest:guest@127.0.0.1:5672/?queue=q"}
	retention := func() retentionFlags {
		return retentionFlags{backlog: "1d", deadLetter: "14d", replayMargin: "7d", resultsExtra: "0"}
	}
	for _, tc := range []struct {
		name string
		ok   func() options
		bad  func(options) // makes one value bad
	}{
		{"submit --kind", func() options { return &submitOptions{g: g, kind: "pdf-info", tenant: "acme", file: "-"} },
			func(o options) { o.(*submitOptions).kind = "Bad Kind" }},
		{"submit --tenant", func() options { return &submitOptions{g: g, kind: "pdf-info", tenant: "acme", file: "-"} },
			func(o options) { o.(*submitOptions).tenant = "" }},
		{"submit --priority", func() options {
			return &submitOptions{g: g, kind: "pdf-info", tenant: "acme", file: "-", prioritySet: true, priority: 4}
		}, func(o options) { o.(*submitOptions).priority = 5 }},
		{"work --http", func() options {
			return &workOptions{g: g, kind: "pdf-info", concurrency: 2, httpAddr: "127.0.0.1:9090"}
		},
			func(o options) { o.(*workOptions).httpAddr = "9090" }},
		{"work --concurrency", func() options { return &workOptions{g: g, kind: "pdf-info", concurrency: 2} },
			func(o options) { o.(*workOptions).concurrency = 0 }},
		{"work --exec", func() options {
			return &workOptions{g: g, kind: "k1", concurrency: 2, exec: true, argv: []string{"true"}}
		},
			func(o options) { o.(*workOptions).argv = nil }},
		{"work broker-only flag", func() options {
			return &workOptions{g: withBroker, kind: "pdf-info", concurrency: 2, brokerOnly: []string{"idle"}}
		},
			func(o options) { o.(*workOptions).g = g }},
		{"work --adopt-tenant", func() options {
			return &workOptions{g: withBroker, kind: "pdf-info", concurrency: 2, adoptTenant: "acme", pointerBucket: "b"}
		}, func(o options) { o.(*workOptions).pointerBucket = "" }},
		{"run --tenant", func() options { return &runOptions{g: g, tenant: "local", concurrency: 2, args: []string{"x.pdf"}} },
			func(o options) { o.(*runOptions).tenant = "no/slash" }},
		{"relay --batch", func() options { return &relayOptions{g: withBroker, batch: 100} },
			func(o options) { o.(*relayOptions).batch = 0 }},
		{"relay --broker", func() options { return &relayOptions{g: withBroker, batch: 100} },
			func(o options) { o.(*relayOptions).g = g }},
		{"jobs --limit", func() options { return &jobsOptions{reader: reader{g}, paging: pagingFlags{limit: 5}} },
			func(o options) { o.(*jobsOptions).paging.limit = -1 }},
		{"jobs --since", func() options {
			return &jobsOptions{reader: reader{g}, paging: pagingFlags{since: "2026-12-01T09:00:00Z"}}
		},
			func(o options) { o.(*jobsOptions).paging.since = "yesterday" }},
		{"dead --since", func() options { return &deadOptions{reader: reader{g}, paging: pagingFlags{since: "36h"}} },
			func(o options) { o.(*deadOptions).paging.since = "-2d" }},
		{"jobs --state", func() options { return &jobsOptions{reader: reader{g}, state: "dead"} },
			func(o options) { o.(*jobsOptions).state = "sleeping" }},
		{"jobs --kind", func() options { return &jobsOptions{reader: reader{g}, kind: "pdf-info"} },
			func(o options) { o.(*jobsOptions).kind = "X" }},
		{"jobs release JOB", func() options { return &jobsReleaseOptions{existing: existing{g}, job: jobArg{arg: "1"}} },
			func(o options) { o.(*jobsReleaseOptions).job.arg = "one" }},
		{"result JOB", func() options { return &resultOptions{reader: reader{g}, job: jobArg{arg: "7"}} },
			func(o options) { o.(*resultOptions).job.arg = "-7" }},
		{"inspect JOB", func() options { return &inspectOptions{reader: reader{g}, job: jobArg{arg: "7"}} },
			func(o options) { o.(*inspectOptions).job.arg = "" }},
		{"dead --kind", func() options { return &deadOptions{reader: reader{g}} },
			func(o options) { o.(*deadOptions).kind = "-x" }},
		{"dead replay --all and JOB", func() options { return &deadReplayOptions{existing: existing{g}, all: true} },
			func(o options) { o.(*deadReplayOptions).args = []string{"1"} }},
		{"dead replay --kind", func() options { return &deadReplayOptions{existing: existing{g}, args: []string{"1"}} },
			func(o options) { o.(*deadReplayOptions).kind = "pdf-info" }},
		{"dead purge --older-than", func() options { return &deadPurgeOptions{existing: existing{g}, olderThan: "14d"} },
			func(o options) { o.(*deadPurgeOptions).olderThan = "-1h" }},
		{"url --ttl", func() options { return &urlOptions{existing: existing{g}, ttlText: "15m", job: jobArg{arg: "1"}} },
			func(o options) { o.(*urlOptions).ttlText = "8d" }},
		{"serve --addr", func() options { return &serveOptions{existing: existing{g}, addr: defaultServeAddr} },
			func(o options) { o.(*serveOptions).addr = "8080" }},
		{"retention --backlog", func() options { return &retentionOptions{g: g, in: retention()} },
			func(o options) { o.(*retentionOptions).in.backlog = "soon" }},
		{"lifecycle --format", func() options { return &lifecycleOptions{g: g, in: retention(), format: "gcs"} },
			func(o options) { o.(*lifecycleOptions).format = "azure" }},
		{"lifecycle apply --store", func() options {
			in := retention()
			return &lifecycleApplyOptions{g: &globals{maxAttempts: 5, store: "s3://bucket?region=us-east-1"}, in: &in}
		}, func(o options) { o.(*lifecycleApplyOptions).g = g }},
		{"doctor --retry-window", func() options { return &doctorOptions{g: g, in: retention()} },
			func(o options) { o.(*doctorOptions).in.retryWindow = "1 hour" }},
		{"sweep --grace", func() options { return &sweepOptions{reader: reader{g}, grace: "24h", pageSize: 100} },
			func(o options) { o.(*sweepOptions).grace = "5m" }},
		{"sweep --expire-payloads", func() options {
			return &sweepOptions{reader: reader{g}, grace: "24h", pageSize: 100, expPayloads: "22d"}
		},
			func(o options) { o.(*sweepOptions).expPayloads = "1h" }},
		{"verify --size", func() options { return &verifyOptions{g: g, grace: "24h", sizes: []string{"70KiB"}, sample: 100} },
			func(o options) { o.(*verifyOptions).sizes = []string{"2GiB"} }},
		{"keys --keeper", func() options { return &keysOptions{g: g} },
			func(o options) { o.(*keysOptions).g = &globals{keeper: "base64key://x"} }},
		{"bench --rounds", func() options { return &benchOptions{g: g, rounds: 1} },
			func(o options) { o.(*benchOptions).rounds = 21 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.ok()
			if err := o.Validate(); err != nil {
				t.Fatalf("good options refused: %v", err)
			}
			o = tc.ok()
			tc.bad(o)
			err := o.Validate()
			if !errors.As(err, new(usageError)) {
				t.Fatalf("Validate = %v, want a usage error", err)
			}
		})
	}
}

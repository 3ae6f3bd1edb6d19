package sqs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/internal/testenv"
	"github.com/claimcheck/claimcheck/stores/s3store/s3test"
)

// NpmDirEnv names a directory whose node_modules holds the npm packages
// sns-sqs-big-payload@0.1.4 and aws-sdk@2 (its runtime dependency, which
// it lists only as a development one):
//
//	scripts/sns-sqs-big-payload.sh build && eval "$(scripts/sns-sqs-big-payload.sh env)"
const NpmDirEnv = "CLAIMCHECK_TEST_NPM_DIR"

// npmLine is one line the driver (testdata/npm-driver.js) prints.
type npmLine struct {
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	Pointer bool   `json:"pointer"`
}

// npmSizes are the payload sizes tried: below the package's 256 KiB
// threshold (a raw body), above it, and far above SQS's message size.
var npmSizes = []int{1 << 10, 300 << 10, 5 << 20}

// runNpm runs the driver in mode (produce or consume) with cfg and returns
// the lines it printed.
func runNpm(t *testing.T, dir, mode string, cfg map[string]any) []npmLine {
	t.Helper()
	driver, err := filepath.Abs("testdata/npm-driver.js")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", driver, mode)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "NPM_DRIVER="+string(b), "NODE_NO_WARNINGS=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", mode, err, stderr.String())
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Logf("node %s stderr: %s", mode, s)
	}
	var lines []npmLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var l npmLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("node %s printed %q: %v", mode, sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

// TestNpmSnsSqsBigPayload drives the npm package sns-sqs-big-payload 0.1.4
// (the package itself, through node) against claimcheck over fauxqs and
// SeaweedFS, in both directions:
//   - npm producer → claimcheck consumer, in both of the package's modes
//     (default: an {"S3Payload":…} body; extendedLibraryCompatibility: the
//     AWS pointer with SQSLargePayloadSize), at 1 KiB (a raw body), 300 KiB
//     and 5 MiB: every payload reaches the handler intact (sha256);
//   - claimcheck producer (broker.NewPointer with the legacy marker) → npm
//     consumer in compatibility mode: every payload intact, and no pointer
//     JSON handed to its handler as a payload.
func TestNpmSnsSqsBigPayload(t *testing.T) {
	dir := testenv.Require(t, NpmDirEnv, `scripts/sns-sqs-big-payload.sh build && eval "$(scripts/sns-sqs-big-payload.sh env)"`)
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Unavailable(t, "node is not installed")
	}
	c := fauxqsClient(t)
	bk := s3test.New(t, "npm")
	u, _ := url.Parse(bk.URL)
	s3Endpoint, region := u.Query().Get("endpoint"), u.Query().Get("region")
	store, err := claimcheck.OpenStore(t.Context(), bk.URL, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	base := map[string]any{"sqsEndpoint": os.Getenv(FauxqsEndpointEnv), "s3Endpoint": s3Endpoint, "region": region, "bucket": bk.Name}
	cfg := func(queue string, compat bool, more map[string]any) map[string]any {
		// The queue URL fauxqs returns names a host (sqs.<region>.localhost)
		// that aws-sdk v2, which sends to the queue URL's host, cannot
		// resolve: the same path on the endpoint is the same queue.
		if qu, err := url.Parse(queue); err == nil {
			queue = strings.TrimSuffix(os.Getenv(FauxqsEndpointEnv), "/") + qu.Path
		}
		m := map[string]any{"queueUrl": queue, "compat": compat}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range more {
			m[k] = v
		}
		return m
	}

	for _, mode := range []struct {
		name   string
		compat bool
	}{{"Default", false}, {"Compatibility", true}} {
		t.Run("NpmToClaimcheck/"+mode.name, func(t *testing.T) {
			tr := openFauxqs(t, c, 0, Options{})
			sent := runNpm(t, dir, "produce", cfg(tr.QueueURL(), mode.compat, map[string]any{"sizes": npmSizes}))
			if len(sent) != len(npmSizes) {
				t.Fatalf("the producer sent %d messages, want %d", len(sent), len(npmSizes))
			}
			var mu sync.Mutex
			got := map[string]int64{}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			var outcomes []broker.Outcome
			err := broker.Consume(ctx, tr, store, broker.ConsumeOptions{
				DefaultKind: "json", PointerBucket: bk.Name, AdoptTenant: "npm", RawTenant: "npm",
				Handlers: map[string]claimcheck.Handler{"json": claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
					r, err := job.Payload.Open(ctx)
					if err != nil {
						return nil, err
					}
					defer r.Close()
					h := sha256.New()
					n, err := io.Copy(h, r)
					if err != nil {
						return nil, err
					}
					mu.Lock()
					got[hex.EncodeToString(h.Sum(nil))] = n
					mu.Unlock()
					return nil, nil
				})},
				OnDone: func(_ *broker.Delivery, o broker.Outcome) {
					outcomes = append(outcomes, o)
					if len(outcomes) == len(sent) {
						cancel()
					}
				},
				OnError: func(err error) { t.Logf("consume: %v", err) },
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range outcomes {
				if o.Action != broker.Acked {
					t.Errorf("a message was %s: %v", o.Action, o.Err)
				}
			}
			for _, s := range sent {
				if n, ok := got[s.SHA256]; !ok || n != s.Size {
					t.Errorf("payload of %d bytes, sha256 %s…: handler saw it %v (%d bytes)", s.Size, s.SHA256[:12], ok, n)
				} else {
					t.Logf("npm %s mode → claimcheck: %d bytes, sha256 %s… intact", strings.ToLower(mode.name), s.Size, s.SHA256[:12])
				}
			}
		})
	}

	// claimcheck → npm: the AWS array with the legacy marker for the
	// package's compatibility mode; its own S3Payload body (with
	// claimcheck's current marker, which it ignores) for its default mode,
	// and for the compatibility mode too, which reads S3Payload when no
	// legacy marker is present.
	for _, mode := range []struct {
		name         string
		compat       bool
		marker, body string
	}{
		{"Compatibility", true, broker.AttrLegacyPayloadSize, broker.PointerBodyAWS},
		{"Default", false, "", broker.PointerBodyS3Payload},
		{"CompatibilityS3Payload", true, "", broker.PointerBodyS3Payload},
	} {
		t.Run("ClaimcheckToNpm/"+mode.name, func(t *testing.T) {
			tr := openFauxqs(t, c, 0, Options{})
			want := map[string]int64{}
			for _, n := range npmSizes {
				payload := bytes.Repeat([]byte("claimcheck to npm "), n/18+1)[:n]
				tk, err := store.CheckIn(t.Context(), "acme", bytes.NewReader(payload), nil)
				if err != nil {
					t.Fatal(err)
				}
				p, err := broker.NewPointer(t.Context(), store, bk.Name, tk)
				if err != nil {
					t.Fatal(err)
				}
				p.Marker, p.Body = mode.marker, mode.body
				m, err := p.Message(map[string]string{broker.AttrKind: "json"})
				if err != nil {
					t.Fatal(err)
				}
				if err := tr.Publish(t.Context(), []broker.Message{m}); err != nil {
					t.Fatal(err)
				}
				want[tk.SHA256] = int64(n)
			}
			got := runNpm(t, dir, "consume", cfg(tr.QueueURL(), mode.compat, map[string]any{"count": len(want), "timeoutMs": 60000}))
			if len(got) != len(want) {
				t.Fatalf("the npm handler got %d payloads, want %d", len(got), len(want))
			}
			for _, g := range got {
				if g.Pointer {
					t.Errorf("the npm handler was handed pointer JSON (%d bytes) as a payload", g.Size)
				}
				if n, ok := want[g.SHA256]; !ok || n != g.Size {
					t.Errorf("the npm handler got %d bytes, sha256 %s…, not a payload claimcheck sent", g.Size, g.SHA256[:12])
				} else {
					t.Logf("claimcheck → npm %s: %d bytes, sha256 %s… intact", mode.name, g.Size, g.SHA256[:12])
				}
			}
		})
	}
}

package benchlab

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// TestRunS3 runs the bench with the SDK baseline on a real S3 server (SeaweedFS) at small sizes:
// the claimcheck phases of both variants, the SDK's upload and download of
// the same bytes, ratios per phase, the memory limit with the part buffers,
// and nothing left behind.
func TestRunS3(t *testing.T) {
	raw := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", "scripts/seaweedfs.sh env prints it")
	var log bytes.Buffer
	sizes := []int64{bench.MiB, 12 * bench.MiB} // 12 MiB: three parts
	rep, err := bench.Run(context.Background(), bench.Config{StoreURL: raw, Dir: t.TempDir(), Sizes: sizes, Seed: 7, NoBaseline: true, Baseline: SDKBaseline, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if rep.S3PartBytes != 5*bench.MiB || rep.S3Concurrency != 2 {
		t.Fatalf("S3PartBytes %d, S3Concurrency %d; want 5 MiB and 2 (the defaults)", rep.S3PartBytes, rep.S3Concurrency)
	}
	type key struct {
		size           int64
		variant, phase string
	}
	var got []key
	for _, r := range rep.Results {
		got = append(got, key{r.Size, r.Variant, r.Phase})
		if !r.Verified || r.MiBPerSec <= 0 || r.PeakHeap == 0 {
			t.Errorf("%+v", r)
		}
		if (r.Variant == bench.VariantSDK) != (r.SHA256 == "") {
			t.Errorf("%s %s: sha256 %q", r.Variant, r.Phase, r.SHA256)
		}
	}
	var want []key
	for _, n := range sizes {
		for _, v := range []string{bench.VariantPlain, bench.VariantEncrypted} {
			for _, p := range []string{bench.PhaseCheckIn, bench.PhaseOpen, bench.PhaseStream} {
				want = append(want, key{n, v, p})
			}
		}
		want = append(want, key{n, bench.VariantSDK, bench.PhaseUpload}, key{n, bench.VariantSDK, bench.PhaseDownload})
	}
	if len(got) != len(want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d is %v, want %v", i, got[i], want[i])
		}
	}
	// One ratio per size, claimcheck variant and phase.
	if len(rep.SDKRatios) != len(sizes)*2*3 {
		t.Fatalf("%d SDK ratios: %+v", len(rep.SDKRatios), rep.SDKRatios)
	}
	sdkPhase := map[string]string{bench.PhaseCheckIn: bench.PhaseUpload, bench.PhaseOpen: bench.PhaseDownload, bench.PhaseStream: bench.PhaseDownload}
	for _, c := range rep.SDKRatios {
		r, _ := rep.Result(c.Size, c.Variant, c.Phase)
		s, _ := rep.Result(c.Size, bench.VariantSDK, c.SDKPhase)
		if c.SDKPhase != sdkPhase[c.Phase] || c.Ratio != r.MiBPerSec/s.MiBPerSec {
			t.Errorf("ratio %+v: want %s against %s, %v", c, c.Phase, sdkPhase[c.Phase], r.MiBPerSec/s.MiBPerSec)
		}
	}
	wantLimit := "plain: peak RSS for 12 MiB under 74 MiB (64 MiB + 5 MiB part × 2)"
	if rep.Checks[0].Name != wantLimit || rep.Checks[0].LimitMiB != 74 {
		t.Errorf("first check %q (limit %v MiB), want %q", rep.Checks[0].Name, rep.Checks[0].LimitMiB, wantLimit)
	}
	var out bytes.Buffer
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", out.String())
	for _, s := range []string{"claimcheck/sdk", "sdk phase", "upload", "download", "peak RSS 12 MiB sdk (upload, download)", "s3: parts of 5 MiB, 2 in flight"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q", s)
		}
	}

	// Nothing left: neither claimcheck's objects nor the SDK's.
	store, err := claimcheck.OpenStore(context.Background(), raw, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var client *s3.Client
	store.Bucket().As(&client)
	for _, prefix := range []string{"payloads/bench/", "payloads/bench-enc/", "payloads/bench-sdk/"} {
		u, _ := urlHost(raw)
		out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(u), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Contents) != 0 {
			t.Errorf("%d objects left under %s", len(out.Contents), prefix)
		}
	}
}

func urlHost(raw string) (string, error) {
	i := strings.Index(raw, "://")
	rest := raw[i+3:]
	if j := strings.IndexAny(rest, "/?"); j >= 0 {
		rest = rest[:j]
	}
	return rest, nil
}

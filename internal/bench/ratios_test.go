package bench

import "testing"

// TestSDKRatiosAndLimit: ratios pair each claimcheck phase with the SDK
// phase of its direction; the S3 limit adds the part buffers.
func TestSDKRatiosAndLimit(t *testing.T) {
	r := &Report{Results: []Result{
		{Size: MiB, Variant: VariantPlain, Phase: PhaseCheckIn, MiBPerSec: 50},
		{Size: MiB, Variant: VariantPlain, Phase: PhaseOpen, MiBPerSec: 30},
		{Size: MiB, Variant: VariantEncrypted, Phase: PhaseStream, MiBPerSec: 45},
		{Size: MiB, Variant: VariantSDK, Phase: PhaseUpload, MiBPerSec: 100},
		{Size: MiB, Variant: VariantSDK, Phase: PhaseDownload, MiBPerSec: 60},
	}}
	got := r.sdkRatios()
	want := []SDKRatio{
		{Size: MiB, Variant: VariantPlain, Phase: PhaseCheckIn, SDKPhase: PhaseUpload, MiBPerSec: 50, SDKMiBPS: 100, Ratio: 0.5},
		{Size: MiB, Variant: VariantPlain, Phase: PhaseOpen, SDKPhase: PhaseDownload, MiBPerSec: 30, SDKMiBPS: 60, Ratio: 0.5},
		{Size: MiB, Variant: VariantEncrypted, Phase: PhaseStream, SDKPhase: PhaseDownload, MiBPerSec: 45, SDKMiBPS: 60, Ratio: 0.75},
	}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ratio %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if r.LimitPeakRSSFor() != LimitPeakRSS {
		t.Errorf("file store limit %d", r.LimitPeakRSSFor())
	}
	r.S3PartBytes, r.S3Concurrency = 5*MiB, 2
	if r.LimitPeakRSSFor() != LimitPeakRSS+10*MiB {
		t.Errorf("s3 limit %d", r.LimitPeakRSSFor())
	}
	// The SDK's peaks are not claimcheck's.
	r.Results = append(r.Results, Result{Size: MiB, Variant: VariantSDK, Phase: PhaseUpload, PeakRSS: 500 * MiB})
	if p, _ := r.PeakRSS(MiB); p != 0 {
		t.Errorf("PeakRSS counts the SDK's phases: %d", p)
	}
	if p, _ := r.PeakRSSOf(MiB, VariantSDK); p != 500*MiB {
		t.Errorf("PeakRSSOf(sdk) = %d", p)
	}
}

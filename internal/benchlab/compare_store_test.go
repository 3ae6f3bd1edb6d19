package benchlab

import (
	"bytes"
	"context"
	"fmt"
	"github.com/claimcheck/claimcheck/internal/bench"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// checkStoreCompare checks a store comparison's shape: every case measured
// in every round, every ratio computed (positive), the memory check, and
// the report printed. Figures are not judged: this is no timed test.
func checkStoreCompare(t *testing.T, rep *CompareReport, sizes []int64, rounds int, refs []string, ratios int) {
	t.Helper()
	if len(rep.Groups) != len(sizes) {
		t.Fatalf("%d groups, want %d", len(rep.Groups), len(sizes))
	}
	wantCases := append(refs, CaseCheckIn, CaseCheckInStream, CaseCheckInEnc, CaseOpen, CaseOpenEnc, CaseStream, CaseStreamEnc, CaseClaimFile, CaseClaimFileEnc)
	for _, g := range rep.Groups {
		if len(g.Cases) != len(wantCases) || len(g.Load) != rounds {
			t.Fatalf("%s: %d cases, %d loads", g.Name, len(g.Cases), len(g.Load))
		}
		for i, cs := range g.Cases {
			if cs.Name != wantCases[i] || len(cs.Samples) != rounds {
				t.Fatalf("%s: case %d is %q with %d samples, want %q", g.Name, i, cs.Name, len(cs.Samples), wantCases[i])
			}
			for _, s := range cs.Samples {
				if s.Seconds <= 0 || s.Bytes <= 0 {
					t.Fatalf("%s: %s: %+v", g.Name, cs.Name, s)
				}
			}
		}
		if len(g.Ratios) != ratios {
			t.Fatalf("%s: %d ratios", g.Name, len(g.Ratios))
		}
		for _, q := range g.Ratios {
			if q.Min <= 0 || len(q.PerRound) != rounds {
				t.Fatalf("%s: %s: %+v", g.Name, q.Name, q)
			}
		}
	}
	// One memory line per claimcheck case, each with every size's figure.
	if ccCases := len(wantCases) - len(refs); len(rep.Checks) != ccCases && (len(rep.Checks) != 1 || rep.Checks[0].Status != "SKIP") {
		t.Fatalf("%d checks, want %d: %+v", len(rep.Checks), ccCases, rep.Checks)
	}
	for _, c := range rep.Checks {
		if c.Status != "SKIP" && (c.ValueMiB <= 0 || strings.Count(c.Detail, "VmHWM") != len(sizes)) {
			t.Fatalf("memory check %+v: want a figure per size", c)
		}
	}
	var out bytes.Buffer
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"load average", "check-in", "median", "min–max"} {
		if !strings.Contains(out.String(), s) {
			t.Fatalf("report lacks %q:\n%s", s, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// TestCompareStoreFile compares on a real file store at small sizes and
// leaves nothing behind in it.
func TestCompareStoreFile(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	sizes := []int64{bench.MiB, 3 * bench.MiB}
	profiles := t.TempDir()
	rep, err := CompareStore(t.Context(), StoreCompareConfig{StoreURL: "file://" + store, Dir: dir, Sizes: sizes, Rounds: 2, ProfileDir: profiles})
	if err != nil {
		t.Fatal(err)
	}
	checkStoreCompare(t, rep, sizes, 2, []string{CaseSHA256, CaseDisk}, 9)
	// One CPU profile per claimcheck case and size (the first round's).
	for _, size := range []string{"1MiB", "3MiB"} {
		for _, c := range []string{"checkin", "checkin-stream", "checkin-enc", "open", "open-enc", "stream", "stream-enc", "claimfile", "claimfile-enc"} {
			if fi, err := os.Stat(filepath.Join(profiles, "file-"+size+"-"+c+".pprof")); err != nil || fi.Size() == 0 {
				t.Fatalf("profile of %s at %s: %v", c, size, err)
			}
		}
	}
	var left []string
	filepath.WalkDir(store, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Fatalf("files left in the store: %q", left)
	}
}

// TestCompareStoreS3 compares on a real S3 server (SeaweedFS) at small
// sizes (12 MiB: parts) and leaves no object behind.
func TestCompareStoreS3(t *testing.T) {
	raw := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", "eval \"$(scripts/seaweedfs.sh env)\"")
	sizes := []int64{bench.MiB, 12 * bench.MiB}
	rep, err := CompareStore(t.Context(), StoreCompareConfig{StoreURL: raw, Dir: t.TempDir(), Sizes: sizes, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkStoreCompare(t, rep, sizes, 2, []string{CasePutObject, CaseGetObject, CaseGetObjectSHA256, CaseGetObjectDiscard, CaseGetObjectFileSHA256, CaseGetObjectSyncSHA256}, 12)
	s, err := claimcheck.OpenStore(context.Background(), raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var client *s3.Client
	if !s.Bucket().As(&client) {
		t.Fatal("no s3 client")
	}
	u := strings.TrimPrefix(raw, "s3://")
	bucket, _, _ := strings.Cut(u, "?")
	var prefix string
	for _, n := range rep.Notes {
		if t, ok := strings.CutPrefix(n, TenantsNote); ok {
			prefix = claimcheck.PrefixPayloads + strings.TrimSuffix(t, "*")
		}
	}
	if prefix == "" {
		t.Fatalf("no tenants note in %q", rep.Notes)
	}
	out, err := client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) > 0 {
		t.Fatalf("%d objects left under the run's tenants (%s*)", len(out.Contents), prefix)
	}
}

// BenchmarkCheckInFromFile checks in a file of 256 MiB (written once,
// outside the timer) per iteration, on a file:// store in a temporary
// directory and, when CLAIMCHECK_TEST_S3_URL is set, on that S3 store:
// the benchmark behind the CPU profiles of check-in (go test -cpuprofile).
// Each object is deleted after its iteration, outside the timer.
func BenchmarkCheckInFromFile(b *testing.B) {
	const size = 256 * bench.MiB
	fromFileStores(b, 3, size, func(b *testing.B, name, raw, dir, src string) {
		ctx := context.Background()
		s, err := claimcheck.OpenStore(ctx, raw, &claimcheck.Options{SpoolDir: filepath.Join(dir, "spool")})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.SetBytes(size)
		tenant := fmt.Sprintf("bench-profile-%d", time.Now().UnixNano()%1e9) // this run's own keys on a shared bucket
		for i := 0; i < b.N; i++ {
			f, err := os.Open(src)
			if err != nil {
				b.Fatal(err)
			}
			t, err := s.CheckIn(ctx, tenant, f, nil)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := s.Bucket().Delete(ctx, t.Key); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// BenchmarkClaimFromFile claims, read to the end in 1 MiB reads, a payload
// of 256 MiB checked in once (outside the timer) on a file:// store in a
// temporary directory and, when CLAIMCHECK_TEST_S3_URL is set, on that S3
// store, next to the reference of bench --compare (SHA-256 of the file; the
// SDK's GetObject into a file): the benchmark behind the CPU profiles of
// verified Open and OpenStream (go test -cpuprofile; each case runs under
// the pprof label "case", for -tagfocus).
func BenchmarkClaimFromFile(b *testing.B) {
	const size = 256 * bench.MiB
	fromFileStores(b, 5, size, func(b *testing.B, name, raw, dir, src string) {
		ctx := context.Background()
		keeper, closeKeeper, err := bench.KeeperOr(nil)
		if err != nil {
			b.Fatal(err)
		}
		defer closeKeeper()
		spool := filepath.Join(dir, "spool")
		plain, err := claimcheck.OpenStore(ctx, raw, &claimcheck.Options{SpoolDir: spool})
		if err != nil {
			b.Fatal(err)
		}
		defer plain.Close()
		enc, err := claimcheck.OpenStore(ctx, raw, &claimcheck.Options{SpoolDir: spool, Keeper: keeper})
		if err != nil {
			b.Fatal(err)
		}
		defer enc.Close()
		c := &storeCompare{ctx: ctx, plain: plain, enc: enc, dir: dir, tenant: fmt.Sprintf("bench-claim-%d", time.Now().UnixNano()%1e9)}
		if name == "s3" {
			if err := c.openSDK(raw); err != nil {
				b.Fatal(err)
			}
		}
		tp, err := c.checkInFile(plain, c.tenant, src, false)
		if err != nil {
			b.Fatal(err)
		}
		defer c.delete(plain, tp)
		te, err := c.checkInFile(enc, c.tenant+"-enc", src, false)
		if err != nil {
			b.Fatal(err)
		}
		defer c.delete(enc, te)
		ref := func() (int64, error) { return sha256File(src) }
		if c.sdk != nil {
			key, dl := c.sdkPrefix+"ref", filepath.Join(dir, "download")
			in, err := os.Open(src)
			if err != nil {
				b.Fatal(err)
			}
			_, err = c.sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key), Body: in, ContentLength: aws.Int64(size)})
			in.Close()
			if err != nil {
				b.Fatal(err)
			}
			defer c.sdkDelete(ctx, key)
			defer os.Remove(dl)
			ref = func() (int64, error) { return c.getInto(ctx, key, dl, false) }
		}
		cases := []struct {
			name string
			run  func() (int64, error)
		}{
			{"reference", ref},
			{"open", func() (int64, error) { return c.claim(plain, tp, false) }},
			{"open-enc", func() (int64, error) { return c.claim(enc, te, false) }},
			{"stream", func() (int64, error) { return c.claim(plain, tp, true) }},
			{"stream-enc", func() (int64, error) { return c.claim(enc, te, true) }},
			{"claimfile", func() (int64, error) { return claimFile(ctx, plain, tp, filepath.Join(dir, "claimed")) }},
		}
		for _, cs := range cases {
			b.Run(cs.name, func(b *testing.B) {
				b.SetBytes(size)
				pprof.Do(ctx, pprof.Labels("case", name+"/"+cs.name), func(context.Context) {
					for i := 0; i < b.N; i++ {
						if n, err := cs.run(); err != nil || n != size {
							b.Fatalf("%d bytes, %v", n, err)
						}
					}
				})
			})
		}
	})
}

// claimFile claims t into the file at path (Payload.WriteFile) and
// returns its size.
func claimFile(ctx context.Context, s *claimcheck.Store, t *claimcheck.Ticket, path string) (int64, error) {
	p, err := s.Claim(t)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	if err := p.WriteFile(ctx, path); err != nil {
		return 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// fromFileStores writes a source file of size bytes (Stream(seed, size))
// in a temporary directory and runs fn as a sub-benchmark per store: "file"
// (a file:// store in that directory) and, when CLAIMCHECK_TEST_S3_URL is
// set, "s3" (raw is the store's URL; dir the directory, src the file).
func fromFileStores(b *testing.B, seed uint64, size int64, fn func(b *testing.B, name, raw, dir, src string)) {
	dir := b.TempDir()
	src := filepath.Join(dir, "source")
	f, err := os.Create(src)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.ReadFrom(bench.Stream(seed, size)); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	stores := [][2]string{{"file", "file://" + filepath.Join(dir, "store")}}
	if raw := os.Getenv("CLAIMCHECK_TEST_S3_URL"); raw != "" {
		stores = append(stores, [2]string{"s3", raw})
	}
	for _, st := range stores {
		b.Run(st[0], func(b *testing.B) { fn(b, st[0], st[1], dir, src) })
	}
}

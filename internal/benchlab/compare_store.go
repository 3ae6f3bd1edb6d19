package benchlab

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/claimcheck/claimcheck/internal/bench"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/secrets"

	"github.com/claimcheck/claimcheck"
)

// DefaultCompareSizes are the payload sizes CompareStore measures when
// StoreCompareConfig.Sizes is empty: the sizes of issue 13's S3 row.
var DefaultCompareSizes = []int64{64 * bench.MiB, 512 * bench.MiB, 1 * bench.GiB}

// The goals of issue 13, as ratios of claimcheck over its reference in
// the same round (median over the rounds).
const (
	// GoalFileCheckIn: file-store check-in, from a regular file and from
	// a stream, over min(SHA-256 of the file, the disk's write+fsync of
	// it) (issue 29; issue 13's was 0.6).
	GoalFileCheckIn = 0.85
	// GoalFileCheckInEnc: the encrypted file-store check-in over the same
	// (issue 13).
	GoalFileCheckInEnc = 0.6
	// GoalS3CheckIn: S3 check-in over the SDK's PutObject of the file.
	GoalS3CheckIn = 0.9
	// GoalOpen: verified Open, read into io.Discard, over SHA-256 of the
	// file (file store) or the SDK's GetObject into io.Discard (S3).
	GoalOpen = 0.8
	// GoalOpenStream: OpenStream over SHA-256 of the file (file store) or
	// the SDK's GetObject with the SHA-256 checked (S3).
	GoalOpenStream = 0.95
	// GoalClaimFile: a verified claim into a file (Payload.WriteFile) on
	// S3 over the SDK's GetObject into a file followed by a SHA-256 pass
	// over it (issue 29).
	GoalClaimFile = 0.9
)

// Case names of the store comparison.
const (
	CaseSHA256    = "sha256 of the file"
	CaseDisk      = "disk write+fsync of the file"
	CasePutObject = "sdk PutObject of the file"
	CaseGetObject = "sdk GetObject into a file"
	// CaseGetObjectSHA256 reads the object OpenStream reads with the
	// plain SDK, to io.Discard, checking its SHA-256 against the ticket:
	// what the verification itself costs, without claimcheck.
	CaseGetObjectSHA256 = "sdk GetObject, SHA-256 checked"
	// CaseGetObjectDiscard reads claimcheck's object with the plain SDK
	// into io.Discard: the reference of verified Open, which is read into
	// io.Discard too.
	CaseGetObjectDiscard = "sdk GetObject into io.Discard"
	// CaseGetObjectFileSHA256 downloads claimcheck's object into a file
	// with the plain SDK, then hashes the file and checks it against the
	// ticket: a verified download done by hand, the reference of
	// CaseClaimFile.
	CaseGetObjectFileSHA256 = "sdk GetObject into a file + SHA-256"
	// CaseGetObjectSyncSHA256 is CaseGetObjectFileSHA256 with the file
	// fsynced before it is hashed: durable on disk when done, as
	// Payload.WriteFile's file is, so the ratio over it compares like
	// with like (the kernel writes the other reference's file back after
	// its time is taken).
	CaseGetObjectSyncSHA256 = "sdk GetObject into a file, fsynced, + SHA-256"
	CaseCheckIn             = "claimcheck check-in"
	// CaseCheckInStream checks the file in as a plain io.Reader (no
	// *os.File: what an HTTP body or standard input gives).
	CaseCheckInStream = "claimcheck check-in from a stream"
	CaseCheckInEnc    = "claimcheck check-in, encrypted"
	CaseOpen          = "claimcheck verified Open"
	CaseOpenEnc       = "claimcheck verified Open, encrypted"
	CaseStream        = "claimcheck OpenStream"
	CaseStreamEnc     = "claimcheck OpenStream, encrypted"
	// CaseClaimFile claims into a file (Payload.WriteFile: verified in one
	// pass, fsynced, renamed into place).
	CaseClaimFile    = "claimcheck verified claim into a file"
	CaseClaimFileEnc = "claimcheck verified claim into a file, encrypted"
)

// StoreCompareConfig configures CompareStore.
type StoreCompareConfig struct {
	// StoreURL is a file:// or s3:// store. Default: file://<tmp>/store
	// with <tmp> a fresh directory under Dir, removed afterwards.
	StoreURL string
	// Dir holds the generated source file of each size (and the default
	// store and spool). Default os.TempDir().
	Dir string
	// SpoolDir is claimcheck's Options.SpoolDir. Default <tmp>/spool.
	SpoolDir string
	// Sizes in bytes, each > 0. Default DefaultCompareSizes.
	Sizes []int64
	// Rounds per size (default 3).
	Rounds int
	// Keeper encrypts the encrypted cases. Default: a localsecrets keeper
	// under a fresh random key.
	Keeper *secrets.Keeper
	// Seed selects the generated content.
	Seed uint64
	// Log receives a line per measured run.
	Log io.Writer
	// ProfileDir, if set, receives a CPU profile (runtime/pprof) of the
	// first round of each claimcheck case of each size, named
	// <file|s3>-<size>-<case>.pprof: checkin, checkin-stream, checkin-enc,
	// open, open-enc, stream, stream-enc, claimfile, claimfile-enc (such
	// as file-512MiB-checkin-enc.pprof).
	ProfileDir string
}

// TenantsNote begins the report's note naming the run's tenants (a
// prefix): each run checks in under tenants of its own.
const TenantsNote = "tenants: "

// copyBuf is the buffer size of the cases' reads and writes (1 MiB, as a
// consumer of a large payload would use).
const copyBuf = 1 << 20

// CompareStore runs claimcheck against the plain references on one store,
// one group per size, each case reading the same generated file of that
// size (written once, outside any measurement), like with like:
//
//   - file://: SHA-256 of the file, and the disk writing it (1 MiB writes
//     into the store's directory, fsync of the file and its directory); the
//     check-ins (from the file, from it as a plain stream, encrypted) and
//     the verified claims into a file (Payload.WriteFile, fsynced) over the
//     slower of the two; verified Open and OpenStream, read to the end in
//     1 MiB reads into io.Discard, over SHA-256 of the file.
//   - s3://: the AWS SDK alone on a plain client (the store's endpoint,
//     credentials and HTTP transport, none of claimcheck's middleware and
//     the SDK's default checksums): PutObject of the file, the check-ins
//     over it; GetObject into a file, into a file followed by a SHA-256
//     pass over it checked against the ticket, and the same with the file
//     fsynced first (durable, as a verified claim's file is), the verified
//     claims into a file over all three; GetObject into io.Discard, verified Open (read into
//     io.Discard) over it; GetObject with its SHA-256 computed as it is read
//     and checked (CaseGetObjectSHA256), OpenStream over it and over
//     GetObject into io.Discard. The SDK's downloads read claimcheck's own
//     plain object, except GetObject into a file, which reads one it put.
//
// Every claimcheck case also has its peak RssAnon checked against
// LimitAnon at each size and FlatAnon from the smallest size to the
// largest (one check per case, VmHWM printed beside it). Objects
// are deleted after each run; the claim cases read objects checked in once
// per size under a tenant of their own.
func CompareStore(ctx context.Context, cfg StoreCompareConfig) (*CompareReport, error) {
	sizes := cfg.Sizes
	if len(sizes) == 0 {
		sizes = DefaultCompareSizes
	}
	for _, n := range sizes {
		if n <= 0 {
			return nil, fmt.Errorf("bench: size %d: sizes must be positive", n)
		}
	}
	tmp, err := os.MkdirTemp(cfg.Dir, "claimcheck-compare-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(tmp)
	if tmp, err = filepath.Abs(tmp); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	storeURL, spoolDir := cfg.StoreURL, cfg.SpoolDir
	if storeURL == "" {
		storeURL = "file://" + filepath.ToSlash(filepath.Join(tmp, "store"))
	}
	if spoolDir == "" {
		spoolDir = filepath.Join(tmp, "spool")
	}
	keeper, closeKeeper, err := bench.KeeperOr(cfg.Keeper)
	if err != nil {
		return nil, err
	}
	defer closeKeeper()
	plain, err := claimcheck.OpenStore(ctx, storeURL, &claimcheck.Options{SpoolDir: spoolDir})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer plain.Close()
	enc, err := claimcheck.OpenStore(ctx, storeURL, &claimcheck.Options{SpoolDir: spoolDir, Keeper: keeper})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer enc.Close()

	var run [4]byte
	if _, err := rand.Read(run[:]); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	// Tenants of this run only: another run on the same bucket checks in
	// the same bytes under the same content addresses, and would delete
	// this run's objects.
	c := &storeCompare{ctx: ctx, plain: plain, enc: enc, dir: tmp, spoolDir: spoolDir, seed: cfg.Seed,
		tenant: "bench-" + hex.EncodeToString(run[:]), profileDir: cfg.ProfileDir, profiled: map[string]bool{}}
	if bench.IsS3(storeURL) {
		if err := c.openSDK(storeURL); err != nil {
			return nil, err
		}
	} else if c.fileRoot, err = fileRoot(storeURL); err != nil {
		return nil, err
	}
	title := "claimcheck bench --compare (file store)"
	if c.sdk != nil {
		title = "claimcheck bench --compare (s3 store)"
	}
	var groups []Group
	for _, n := range sizes {
		groups = append(groups, c.group(n))
	}
	rep, err := Compare(ctx, Comparison{Title: title, Rounds: cfg.Rounds, Groups: groups, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("store %s, spool %s", bench.RedactURL(storeURL), spoolDir),
		TenantsNote+c.tenant+"*")
	rep.Checks = c.memoryChecks(rep, sizes)
	return rep, nil
}

type storeCompare struct {
	ctx        context.Context
	plain, enc *claimcheck.Store
	dir        string // source files, the disk reference's copies (s3), downloads
	spoolDir   string
	fileRoot   string // file:// stores: the store's directory
	seed       uint64
	tenant     string // prefix of this run's tenants
	profileDir string // StoreCompareConfig.ProfileDir
	profiled   map[string]bool

	sdk       *s3.Client // s3:// stores: the plain client
	bucket    string
	sdkPrefix string
}

// fileRoot is a file:// store's directory (OpenStore has checked the URL).
func fileRoot(storeURL string) (string, error) {
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "file" {
		return "", fmt.Errorf("bench: compare needs a file:// or s3:// store")
	}
	return filepath.FromSlash(u.Path), nil
}

// openSDK makes the plain client of the S3 references: the store client's
// options (endpoint, region, credentials, HTTP client) without claimcheck's
// middleware.
func (c *storeCompare) openSDK(storeURL string) error {
	var client *s3.Client
	if !c.plain.Bucket().As(&client) {
		return fmt.Errorf("bench: the s3:// store exposes no *s3.Client for the SDK reference")
	}
	c.sdk = s3.New(client.Options(), func(o *s3.Options) {
		o.APIOptions = nil
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
	})
	u, err := url.Parse(storeURL)
	if err != nil {
		return fmt.Errorf("bench: store URL: %w", err)
	}
	c.bucket = u.Host
	var run [6]byte
	if _, err := rand.Read(run[:]); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	// Under payloads/, so that a killed run's objects are swept.
	c.sdkPrefix = claimcheck.PrefixPayloads + c.tenant + "-sdk/" + hex.EncodeToString(run[:]) + "/"
	return nil
}

// group is the comparison of one size.
func (c *storeCompare) group(n int64) Group {
	src := filepath.Join(c.dir, "source-"+strconv.FormatInt(n, 10))
	var openPlain, openEnc *claimcheck.Ticket
	var checkedIn *claimcheck.Ticket
	g := Group{Name: fmt.Sprintf("%s, %s", c.storeKind(), bench.FormatSize(n))}
	g.Setup = func(ctx context.Context) error {
		f, err := os.Create(src)
		if err != nil {
			return err
		}
		if _, err := io.CopyBuffer(f, bench.Stream(c.seed, n), make([]byte, copyBuf)); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if openPlain, err = c.checkInFile(c.plain, c.tenant+"-open", src, false); err != nil {
			return err
		}
		openEnc, err = c.checkInFile(c.enc, c.tenant+"-open-enc", src, false)
		return err
	}
	g.Teardown = func(ctx context.Context) {
		c.delete(c.plain, openPlain)
		c.delete(c.enc, openEnc)
		os.Remove(src)
	}
	size := strings.ReplaceAll(bench.FormatSize(n), " ", "")
	checkIn := func(name, profile string, s *claimcheck.Store, tenant string, stream bool) Case {
		return Case{Name: name,
			Run: func(ctx context.Context) (Sample, error) {
				defer c.profile(size, profile)()
				t, err := c.checkInFile(s, tenant, src, stream)
				checkedIn = t
				if err != nil {
					return Sample{}, err
				}
				if t.Size != n {
					return Sample{}, fmt.Errorf("ticket size %d, want %d", t.Size, n)
				}
				return Sample{Bytes: n}, nil
			},
			Cleanup: func(ctx context.Context) error { c.delete(s, checkedIn); checkedIn = nil; return nil },
		}
	}
	claim := func(name, profile string, s *claimcheck.Store, t **claimcheck.Ticket, stream bool) Case {
		return Case{Name: name, Run: func(ctx context.Context) (Sample, error) {
			defer c.profile(size, profile)()
			got, err := c.claim(s, *t, stream)
			if err != nil {
				return Sample{}, err
			}
			if got != n {
				return Sample{}, fmt.Errorf("read %d bytes, want %d", got, n)
			}
			return Sample{Bytes: n}, nil
		}}
	}
	claimFile := func(name, profile string, s *claimcheck.Store, t **claimcheck.Ticket) Case {
		out := filepath.Join(c.dir, "claimed-"+strconv.FormatInt(n, 10))
		return Case{Name: name, Run: func(ctx context.Context) (Sample, error) {
			defer c.profile(size, profile)()
			p, err := s.Claim(*t)
			if err != nil {
				return Sample{}, err
			}
			defer p.Close()
			if err := p.WriteFile(ctx, out); err != nil {
				return Sample{}, err
			}
			if fi, err := os.Stat(out); err != nil || fi.Size() != n {
				return Sample{}, fmt.Errorf("claimed into a file: %v, want %d bytes", err, n)
			}
			return Sample{Bytes: n}, nil
		}, Cleanup: func(context.Context) error { return os.Remove(out) }}
	}
	ccCases := []Case{
		checkIn(CaseCheckIn, "checkin", c.plain, c.tenant, false),
		checkIn(CaseCheckInStream, "checkin-stream", c.plain, c.tenant+"-stream", true),
		checkIn(CaseCheckInEnc, "checkin-enc", c.enc, c.tenant+"-enc", false),
		claim(CaseOpen, "open", c.plain, &openPlain, false),
		claim(CaseOpenEnc, "open-enc", c.enc, &openEnc, false),
		claim(CaseStream, "stream", c.plain, &openPlain, true),
		claim(CaseStreamEnc, "stream-enc", c.enc, &openEnc, true),
		claimFile(CaseClaimFile, "claimfile", c.plain, &openPlain),
		claimFile(CaseClaimFileEnc, "claimfile-enc", c.enc, &openEnc),
	}
	if c.sdk == nil {
		copyPath := filepath.Join(c.fileRoot, c.tenant+"-disk-reference.tmp")
		g.Cases = append([]Case{
			{Name: CaseSHA256, Run: func(ctx context.Context) (Sample, error) {
				got, err := sha256File(src)
				return Sample{Bytes: got}, err
			}},
			{Name: CaseDisk, Run: func(ctx context.Context) (Sample, error) {
				got, err := copyFsync(src, copyPath)
				return Sample{Bytes: got}, err
			}, Cleanup: func(context.Context) error { return os.Remove(copyPath) }},
		}, ccCases...)
		limit := []string{CaseSHA256, CaseDisk}
		g.Ratios = []RatioSpec{
			{Name: "check-in / min(sha256, disk)", Subject: CaseCheckIn, References: limit, Metric: MetricMiBPerSec, Goal: GoalFileCheckIn},
			{Name: "check-in from a stream / min(sha256, disk)", Subject: CaseCheckInStream, References: limit, Metric: MetricMiBPerSec, Goal: GoalFileCheckIn},
			{Name: "check-in encrypted / min(sha256, disk)", Subject: CaseCheckInEnc, References: limit, Metric: MetricMiBPerSec, Goal: GoalFileCheckInEnc},
			{Name: "verified Open / sha256 of the file", Subject: CaseOpen, References: []string{CaseSHA256}, Metric: MetricMiBPerSec, Goal: GoalOpen},
			{Name: "verified Open encrypted / sha256 of the file", Subject: CaseOpenEnc, References: []string{CaseSHA256}, Metric: MetricMiBPerSec},
			{Name: "OpenStream / sha256 of the file", Subject: CaseStream, References: []string{CaseSHA256}, Metric: MetricMiBPerSec, Goal: GoalOpenStream},
			{Name: "OpenStream encrypted / sha256 of the file", Subject: CaseStreamEnc, References: []string{CaseSHA256}, Metric: MetricMiBPerSec},
			{Name: "claim into a file / min(sha256, disk)", Subject: CaseClaimFile, References: limit, Metric: MetricMiBPerSec},
			{Name: "claim into a file encrypted / min(sha256, disk)", Subject: CaseClaimFileEnc, References: limit, Metric: MetricMiBPerSec},
		}
		return g
	}
	key := c.sdkPrefix + strconv.FormatInt(n, 10)
	dl := filepath.Join(c.dir, "download-"+strconv.FormatInt(n, 10))
	put := func(ctx context.Context) error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = c.sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key), Body: f, ContentLength: aws.Int64(n)})
		return err
	}
	g.Cases = append([]Case{
		{Name: CasePutObject, Run: func(ctx context.Context) (Sample, error) { return Sample{Bytes: n}, put(ctx) },
			Cleanup: func(ctx context.Context) error { return c.sdkDelete(ctx, key) }},
		{Name: CaseGetObject, Prepare: put, Run: func(ctx context.Context) (Sample, error) {
			got, err := c.getInto(ctx, key, dl, false)
			return Sample{Bytes: got}, err
		}, Cleanup: func(ctx context.Context) error { os.Remove(dl); return c.sdkDelete(ctx, key) }},
		{Name: CaseGetObjectSHA256, Run: func(ctx context.Context) (Sample, error) {
			got, err := c.getChecked(ctx, openPlain, "", false)
			return Sample{Bytes: got}, err
		}},
		{Name: CaseGetObjectDiscard, Run: func(ctx context.Context) (Sample, error) {
			got, err := c.getDiscard(ctx, openPlain)
			return Sample{Bytes: got}, err
		}},
		{Name: CaseGetObjectFileSHA256, Run: func(ctx context.Context) (Sample, error) {
			got, err := c.getChecked(ctx, openPlain, dl, false)
			return Sample{Bytes: got}, err
		}, Cleanup: func(context.Context) error { return os.Remove(dl) }},
		{Name: CaseGetObjectSyncSHA256, Run: func(ctx context.Context) (Sample, error) {
			got, err := c.getChecked(ctx, openPlain, dl, true)
			return Sample{Bytes: got}, err
		}, Cleanup: func(context.Context) error { return os.Remove(dl) }},
	}, ccCases...)
	put1, get1 := []string{CasePutObject}, []string{CaseGetObject}
	getSum, discard, checked := []string{CaseGetObjectFileSHA256}, []string{CaseGetObjectDiscard}, []string{CaseGetObjectSHA256}
	getSyncSum := []string{CaseGetObjectSyncSHA256}
	g.Ratios = []RatioSpec{
		{Name: "check-in / sdk PutObject", Subject: CaseCheckIn, References: put1, Metric: MetricMiBPerSec, Goal: GoalS3CheckIn},
		{Name: "check-in from a stream / sdk PutObject", Subject: CaseCheckInStream, References: put1, Metric: MetricMiBPerSec},
		{Name: "check-in encrypted / sdk PutObject", Subject: CaseCheckInEnc, References: put1, Metric: MetricMiBPerSec},
		{Name: "claim into a file / sdk GetObject into a file", Subject: CaseClaimFile, References: get1, Metric: MetricMiBPerSec},
		{Name: "claim into a file / sdk GetObject into a file + SHA-256", Subject: CaseClaimFile, References: getSum, Metric: MetricMiBPerSec, Goal: GoalClaimFile},
		{Name: "claim into a file / sdk GetObject into a file, fsynced, + SHA-256", Subject: CaseClaimFile, References: getSyncSum, Metric: MetricMiBPerSec},
		{Name: "claim into a file encrypted / sdk GetObject into a file + SHA-256", Subject: CaseClaimFileEnc, References: getSum, Metric: MetricMiBPerSec},
		{Name: "verified Open / sdk GetObject into io.Discard", Subject: CaseOpen, References: discard, Metric: MetricMiBPerSec, Goal: GoalOpen},
		{Name: "verified Open encrypted / sdk GetObject into io.Discard", Subject: CaseOpenEnc, References: discard, Metric: MetricMiBPerSec},
		{Name: "OpenStream / sdk GetObject, SHA-256 checked", Subject: CaseStream, References: checked, Metric: MetricMiBPerSec, Goal: GoalOpenStream},
		{Name: "OpenStream / sdk GetObject into io.Discard", Subject: CaseStream, References: discard, Metric: MetricMiBPerSec},
		{Name: "OpenStream encrypted / sdk GetObject, SHA-256 checked", Subject: CaseStreamEnc, References: checked, Metric: MetricMiBPerSec},
	}
	return g
}

// profile starts the CPU profile of the first round of a case of one
// size, if asked for (StoreCompareConfig.ProfileDir), and returns what
// stops it.
func (c *storeCompare) profile(size, what string) func() {
	name := "file"
	if c.sdk != nil {
		name = "s3"
	}
	name += "-" + size + "-" + what + ".pprof"
	if c.profileDir == "" || c.profiled[name] {
		return func() {}
	}
	c.profiled[name] = true
	return startCPUProfile(filepath.Join(c.profileDir, name))
}

func (c *storeCompare) storeKind() string {
	if c.sdk != nil {
		return "s3 store"
	}
	return "file store"
}

// checkInFile checks the file at src in, as the *os.File it is or, with
// stream, as a plain io.Reader (what an HTTP body or standard input is).
func (c *storeCompare) checkInFile(s *claimcheck.Store, tenant, src string, stream bool) (*claimcheck.Ticket, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if stream {
		return s.CheckIn(c.ctx, tenant, struct{ io.Reader }{f}, nil)
	}
	return s.CheckIn(c.ctx, tenant, f, nil)
}

func (c *storeCompare) delete(s *claimcheck.Store, t *claimcheck.Ticket) {
	if t != nil && !t.IsInline() {
		_ = s.Bucket().Delete(context.WithoutCancel(c.ctx), t.Key)
	}
}

// claim claims t and reads it to the end in 1 MiB reads, discarding it:
// the verification is claimcheck's.
func (c *storeCompare) claim(s *claimcheck.Store, t *claimcheck.Ticket, stream bool) (n int64, err error) {
	p, err := s.Claim(t)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := p.Close(); err == nil {
			err = cerr
		}
	}()
	var r io.ReadCloser
	if stream {
		r, err = p.OpenStream(c.ctx)
	} else {
		r, err = p.Open(c.ctx)
	}
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := r.Close(); err == nil {
			err = cerr
		}
	}()
	return io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{r}, make([]byte, copyBuf))
}

// sha256File hashes a file in 1 MiB reads.
func sha256File(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.CopyBuffer(sha256.New(), struct{ io.Reader }{f}, make([]byte, copyBuf))
}

// copyFsync copies src to dst in 1 MiB writes and fsyncs dst and its
// directory: the disk's part of a durable check-in.
func copyFsync(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, make([]byte, copyBuf))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(dst))
	}
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// getInto downloads key into the file at path with the plain SDK, as its
// users do (io.Copy of the body into the file), fsyncing the file before
// it is closed when sync is set.
func (c *storeCompare) getInto(ctx context.Context, key, path string, sync bool) (int64, error) {
	out, err := c.sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, out.Body)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// getChecked reads t's object with the plain SDK and checks its size and
// SHA-256 against t: hashed as it is read into io.Discard, as OpenStream
// does, when path is ""; else downloaded into the file at path (io.Copy,
// as getInto, fsynced when sync is set) and then hashed in a second pass
// over the file.
func (c *storeCompare) getChecked(ctx context.Context, t *claimcheck.Ticket, path string, sync bool) (int64, error) {
	var n int64
	var err error
	h := sha256.New()
	if path == "" {
		out, gerr := c.sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(c.plain.Namespace() + t.Key)})
		if gerr != nil {
			return 0, gerr
		}
		defer out.Body.Close()
		n, err = io.CopyBuffer(h, struct{ io.Reader }{out.Body}, make([]byte, copyBuf))
	} else {
		if _, err = c.getInto(ctx, c.plain.Namespace()+t.Key, path, sync); err != nil {
			return 0, err
		}
		var f *os.File
		if f, err = os.Open(path); err != nil {
			return 0, err
		}
		defer f.Close()
		n, err = io.CopyBuffer(h, struct{ io.Reader }{f}, make([]byte, copyBuf))
	}
	if err == nil && (n != t.Size || hex.EncodeToString(h.Sum(nil)) != t.SHA256) {
		err = fmt.Errorf("the object (%d bytes) does not match its ticket", n)
	}
	return n, err
}

// getDiscard reads t's object with the plain SDK into io.Discard (io.Copy,
// as its users do), unchecked.
func (c *storeCompare) getDiscard(ctx context.Context, t *claimcheck.Ticket) (int64, error) {
	out, err := c.sdk.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(c.plain.Namespace() + t.Key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	return io.Copy(io.Discard, out.Body)
}

func (c *storeCompare) sdkDelete(ctx context.Context, key string) error {
	_, err := c.sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(key)})
	return err
}

// The memory goals of issue 29's answer 1, on the process's own memory
// (peak RssAnon, sampled): at most LimitAnon for every payload size, and
// flat, the largest size's within FlatAnon of the smallest's.
const (
	LimitAnon = 64 * bench.MiB
	FlatAnon  = 8 * bench.MiB
)

// memoryChecks: one line per claimcheck case, its peak RssAnon (the median
// over the rounds) at each size, with its peak VmHWM beside it, against
// LimitAnon at every size and FlatAnon between the smallest size and the
// largest.
func (c *storeCompare) memoryChecks(rep *CompareReport, sizes []int64) []bench.Check {
	if rep.RSSMethod == bench.RSSMethodNone {
		return []bench.Check{{Name: "peak RssAnon of every claimcheck case", Status: "SKIP", Detail: "RSS unavailable on this platform"}}
	}
	type fig struct {
		size       int64
		anon, peak float64
	}
	var names []string
	per := map[string][]fig{}
	for gi, g := range rep.Groups {
		for _, cs := range g.Cases {
			if !strings.HasPrefix(cs.Name, "claimcheck ") || gi >= len(sizes) {
				continue
			}
			var anon, peak []float64
			for _, s := range cs.Samples {
				anon, peak = append(anon, float64(s.PeakAnon)), append(peak, float64(s.PeakRSS))
			}
			a, _, _ := summarize(anon)
			p, _, _ := summarize(peak)
			if _, ok := per[cs.Name]; !ok {
				names = append(names, cs.Name)
			}
			per[cs.Name] = append(per[cs.Name], fig{sizes[gi], a, p})
		}
	}
	var out []bench.Check
	for _, name := range names {
		figs := per[name]
		slices.SortFunc(figs, func(a, b fig) int { return cmp.Compare(a.size, b.size) })
		var parts []string
		var top float64
		for _, f := range figs {
			parts = append(parts, fmt.Sprintf("%s: %.1f (VmHWM %.1f)", bench.FormatSize(f.size), f.anon/bench.MiB, f.peak/bench.MiB))
			top = max(top, f.anon)
		}
		ok := top > 0 && top <= LimitAnon
		detail := "median of the rounds, MiB: " + strings.Join(parts, ", ")
		if len(figs) > 1 {
			growth := figs[len(figs)-1].anon - figs[0].anon
			ok = ok && growth <= FlatAnon
			detail += fmt.Sprintf("; %s over %s: %+.1f MiB (flat: ≤ %s)", bench.FormatSize(figs[len(figs)-1].size), bench.FormatSize(figs[0].size), growth/bench.MiB, bench.FormatSize(FlatAnon))
		}
		out = append(out, bench.Check{Name: "peak RssAnon of " + name, ValueMiB: top / bench.MiB, LimitMiB: LimitAnon / bench.MiB,
			Status: bench.PassFail(ok), Detail: detail})
	}
	return out
}

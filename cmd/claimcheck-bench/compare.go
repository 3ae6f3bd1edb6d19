package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/internal/benchlab"
	"github.com/claimcheck/claimcheck/internal/cli"
)

// compareOptions are the options claimcheck-bench adds to claimcheck's
// bench (--compare, --cpuprofile-dir, --no-sdk-baseline), with its --size
// and --rounds.
type compareOptions struct {
	l         *cli.Lab
	compare   bool
	profile   string
	sizes     []string
	rounds    int
	roundsSet bool // --rounds was given (--compare's default is 3)
	noSDK     bool
	bytes     []int64 // --size parsed by Validate
}

// Validate checks that --compare is not given with --no-sdk-baseline (the
// SDK is its reference on S3), that --cpuprofile-dir comes with
// --compare, --rounds (1 to 20) and each --size (1 B to 64 GiB).
func (o *compareOptions) Validate() error {
	if !o.compare {
		return cli.UsageErrorf("--cpuprofile-dir is for --compare")
	}
	if o.noSDK {
		return cli.UsageErrorf("--compare measures the SDK as its reference: leave out --no-sdk-baseline")
	}
	if o.rounds < 1 || o.rounds > 20 {
		return cli.UsageErrorf("--rounds %d: use 1 to 20", o.rounds)
	}
	if !o.roundsSet {
		o.rounds = 3
	}
	o.bytes = nil
	for _, s := range o.sizes {
		n, err := humanize.ParseBytes(s)
		if err != nil || n == 0 || n > 64<<30 {
			return cli.UsageErrorf("--size %q: want a size between 1 B and 64 GiB such as 4MiB or 1GiB", s)
		}
		o.bytes = append(o.bytes, int64(n))
	}
	return nil
}

// addCompare adds --compare, --cpuprofile-dir and --no-sdk-baseline to
// claimcheck's bench b: with --compare, b runs the comparison instead of
// its own measurement; without, b measures on an s3:// store the AWS SDK
// alone beside claimcheck (benchlab.SDKBaseline) unless --no-sdk-baseline.
func addCompare(b *cobra.Command, l *cli.Lab) {
	o := &compareOptions{l: l}
	b.Long += `

On an s3:// store claimcheck-bench's bench also moves the same bytes with
the AWS SDK alone, on the store's own client: a transfer-manager upload
with the same part size, concurrency and CRC32C checksums, and a GetObject
streamed to io.Discard (under payloads/<tenant>-sdk/, deleted afterwards).
claimcheck's throughput is printed as a share of the SDK's, per phase:
check-in against the upload, open and stream against the download
(--no-sdk-baseline skips it).

With --compare (claimcheck-bench only), claimcheck is measured against the
plain references of the store instead, in this process and run, every case
reading the same generated file, like with like: on a file:// store SHA-256
of the file and the disk writing it (1 MiB writes, fsync of file and
directory), against the slower of which check-in (from the file, from it as
a plain stream, encrypted) and the verified claim into a file are compared,
and verified Open and OpenStream (into io.Discard) with SHA-256 of the file;
on an s3:// store the AWS SDK alone: PutObject of the file (check-in's
reference), GetObject into a file and into a file plus a SHA-256 pass (the
claim into a file's), into io.Discard (Open's), and with its SHA-256 checked
as it is read (OpenStream's). The order of the cases is reversed every
other round (--rounds, default 3); each ratio is printed per round with its
median and min–max, next to the load average as each round started, and
judged against the project's goals (file check-in ≥ 0.85 × min(SHA-256,
disk) from a file and from a stream, S3 check-in ≥ 0.9 × PutObject, claim
into a file on S3 ≥ 0.9 × GetObject into a file + SHA-256, verified Open ≥
0.8 and OpenStream ≥ 0.95 × their references), and each case's peak RssAnon
(VmHWM beside it) against 64 MiB at every size, flat within 8 MiB. The
data directory's disk must hold the largest size four times over on the
default file store, twice on another.`
	b.Flags().BoolVar(&o.compare, "compare", false, "compare claimcheck with the plain references on the store, in this run: SHA-256 and the disk (file://), the AWS SDK's PutObject and GetObject into a file, into a file + SHA-256 (and fsynced first) and into io.Discard (s3://); each ratio per round with its median and min–max, and the load average (default sizes 64MiB, 512MiB, 1GiB; --rounds default 3)")
	b.Flags().StringVar(&o.profile, "cpuprofile-dir", "", "with --compare, write CPU profiles (go tool pprof) of the first round of each claimcheck case into this directory: file-512MiB-checkin.pprof, -checkin-stream, -checkin-enc, -open, -open-enc, -stream, -stream-enc, -claimfile, -claimfile-enc (s3-… on S3)")
	b.Flags().BoolVar(&o.noSDK, "no-sdk-baseline", false, "on an s3:// store, skip the plain AWS SDK upload and download that claimcheck is compared with")
	l.SetBenchBaseline(func(ctx context.Context, store *claimcheck.Store, storeURL, tenant string, seed uint64, m *bench.Meter, log io.Writer) (bench.Baseline, error) {
		if o.noSDK {
			return nil, nil
		}
		return benchlab.SDKBaseline(ctx, store, storeURL, tenant, seed, m, log)
	})
	own := b.RunE
	compare := l.RunE(o, func(cmd *cobra.Command, _ []string) {
		f := cmd.Flags()
		o.sizes, _ = f.GetStringArray("size")
		o.rounds, _ = f.GetInt("rounds")
		o.roundsSet = f.Changed("rounds")
	})
	b.RunE = func(cmd *cobra.Command, args []string) error {
		if !o.compare && o.profile == "" {
			return own(cmd, args)
		}
		return compare(cmd, args)
	}
}

// diskNeed is about the most bench --compare writes under --data at once,
// in bytes: the largest size four times over on the default file store
// (the source file, the two objects the claim cases read, plain and
// encrypted, and a check-in's object or a claim's spool beside them),
// twice on another store (the source file and a download or spool).
// Measured, du -sb of --data every 0.1 s: --compare --size 256MiB 1024 MiB
// on the file store, 434 MiB on S3.
func (o *compareOptions) diskNeed() uint64 {
	sizes := o.bytes
	if len(sizes) == 0 {
		sizes = benchlab.DefaultCompareSizes
	}
	copies := uint64(2)
	if o.l.Store() == "" {
		copies = 4
	}
	return copies * uint64(slices.Max(sizes))
}

// Run is bench --compare: claimcheck against the store's plain references
// (benchlab.CompareStore), printed as a table or JSON.
func (o *compareOptions) Run(ctx context.Context, s cli.Streams) (err error) {
	data, err := o.l.BenchData(o.diskNeed(), "--size")
	if err != nil {
		return err
	}
	cfg := benchlab.StoreCompareConfig{StoreURL: o.l.Store(), Dir: data, Sizes: o.bytes, Rounds: o.rounds, Log: s.Err}
	if cfg.ProfileDir, err = profileDir(o.profile); err != nil {
		return err
	}
	rep, err := benchlab.CompareStore(ctx, cfg)
	if err != nil {
		return err
	}
	if err := o.l.PrintReport(s.Out, rep); err != nil {
		return err
	}
	if !rep.Passed() {
		return fmt.Errorf("bench --compare: a goal or check was not met (see the table)")
	}
	return nil
}

// profileDir creates --cpuprofile-dir dir, if given, and returns it; a
// directory that cannot be created is a usage error naming the flag.
func profileDir(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", cli.UsageErrorf("--cpuprofile-dir %s cannot be created (%v)", dir, pathCause(err))
	}
	return dir, nil
}

// pathCause is err's cause without the path an *os.PathError repeats.
func pathCause(err error) error {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err
	}
	return err
}

package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/bench"
)

// benchOptions are the options of bench.
type benchOptions struct {
	g       *globals
	sizes   []string
	rounds  int
	noSDK   bool
	compare bool
	profile string // --cpuprofile-dir, with --compare
	// roundsSet: --rounds was given (--compare's default is 3).
	roundsSet bool
	bytes     []int64 // --size parsed by Validate
}

// Validate checks --rounds (1 to 20), each --size (1 B to 64 GiB), and
// that --compare is not given with --no-sdk-baseline (the SDK is its
// reference on S3).
func (o *benchOptions) Validate() error {
	if o.compare && o.noSDK {
		return usagef("--compare measures the SDK as its reference: leave out --no-sdk-baseline")
	}
	if o.profile != "" && !o.compare {
		return usagef("--cpuprofile-dir is for --compare")
	}
	if o.rounds < 1 || o.rounds > 20 {
		return usagef("--rounds %d: use 1 to 20", o.rounds)
	}
	o.bytes = nil
	for _, s := range o.sizes {
		n, err := humanize.ParseBytes(s)
		if err != nil || n == 0 || n > 64<<30 {
			return usagef("--size %q: want a size between 1 B and 64 GiB such as 4MiB or 1GiB", s)
		}
		o.bytes = append(o.bytes, int64(n))
	}
	return nil
}

func newBench(g *globals) *cobra.Command {
	o := &benchOptions{g: g}
	c := &cobra.Command{
		Use:   "bench [--size 4MiB --size 1GiB]",
		Short: "Check in and claim generated streams; print throughput and peak memory",
		Long: `Check in, then claim (verified and streaming), a generated pseudo-random
stream of each size, in this process, and print seconds, MiB/s and peak memory
(resident set from /proc/self/status VmHWM, reset between phases; Go heap).
Each size runs unencrypted and encrypted (a local keeper), and the
encrypted throughput is compared with the unencrypted in the same run. It
passes when the largest size peaks under 64 MiB and within 16 MiB of the
smallest, and encrypted throughput is at least 75% of unencrypted. The store
is a file store in the data directory unless --store is given; the data
written is removed afterwards.

On an s3:// store the limit is 64 MiB plus the upload's part buffers (part
size × parts in flight), and the same run also moves the same bytes with the
AWS SDK alone, on the store's own client: a transfer-manager upload with the
same part size, concurrency and CRC32C checksums, and a GetObject streamed
to io.Discard (under payloads/<tenant>-sdk/, deleted afterwards).
claimcheck's throughput is printed as a share of the SDK's, per phase:
check-in against the upload, open and stream against the download
(--no-sdk-baseline skips it).

With --compare, claimcheck is measured against the plain references of the
store instead, in this process and run, every case reading the same
generated file: on a file:// store SHA-256 of the file and the disk writing
it (1 MiB writes, fsync of file and directory), against which check-in
(plain and encrypted) is compared with the slower of the two, and verified
Open and OpenStream with SHA-256 of the file; on an s3:// store the AWS SDK
alone (PutObject of the file, GetObject into a file). The order of the
cases is reversed every other round (--rounds, default 3); each ratio is
printed per round with its median and min–max, next to the load average as
each round started, and judged against the project's goals (file check-in
≥ 0.6 × min(SHA-256, disk), S3 check-in ≥ 0.9 × PutObject, verified Open
≥ 0.8 and OpenStream ≥ 0.95 × the reference) and the memory limit.

Sizes the data directory's disk cannot hold are refused before anything is
written: the largest once, or with --compare four times over on the default
file store and twice on another.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(o, func(cmd *cobra.Command, _ []string) { o.roundsSet = cmd.Flags().Changed("rounds") }),
	}
	c.Flags().StringArrayVar(&o.sizes, "size", nil, "payload size, e.g. 4MiB, 1GiB, 123456 (repeatable; default 4MiB and 1GiB)")
	c.Flags().BoolVar(&o.noSDK, "no-sdk-baseline", false, "on an s3:// store, skip the plain AWS SDK upload and download that claimcheck is compared with")
	c.Flags().IntVar(&o.rounds, "rounds", 1, "rounds per size: bench reports each variant's fastest round (steadier on a busy machine); --compare reports each ratio's median and min–max over the rounds, 3 unless given")
	c.Flags().BoolVar(&o.compare, "compare", false, "compare claimcheck with the plain references on the store, in this run: SHA-256 and the disk (file://), the AWS SDK's PutObject and GetObject (s3://); each ratio per round with its median and min–max, and the load average (default sizes 64MiB, 512MiB, 1GiB)")
	c.Flags().StringVar(&o.profile, "cpuprofile-dir", "", "with --compare, write CPU profiles (go tool pprof) of the first round of each claimcheck case into this directory: file-512MiB-checkin.pprof, -checkin-enc, -open, -open-enc, -stream, -stream-enc (s3-… on S3)")
	c.AddCommand(newBenchRelay(g))
	c.AddCommand(newBenchJobs(g))
	return c
}

// benchData is a bench command's data directory: --data made absolute,
// created and checked writable (ensureWritable), and, when need > 0, with
// need bytes free (ensureFree; flag is what decides need, for the message).
func benchData(g *globals, need uint64, flag string) (string, error) {
	data, err := filepath.Abs(g.data)
	if err != nil {
		return "", err
	}
	if err := ensureWritable(data); err != nil {
		return "", err
	}
	if need > 0 {
		if err := ensureFree(data, need, flag); err != nil {
			return "", err
		}
	}
	return data, nil
}

// diskNeed is about the most bench writes under --data at once, in bytes:
// the largest size once (its object, or a spool) without --compare; with
// --compare, four times over on the default file store (the source file,
// the two objects the claim cases read, plain and encrypted, and a
// check-in's object or a claim's spool beside them), twice on another
// store (the source file and a download or spool). Measured, du -sb of
// --data every 0.1 s: bench --size 1GiB 1024 MiB at most; --compare --size
// 256MiB 1024 MiB on the file store, 434 MiB on S3.
func (o *benchOptions) diskNeed() uint64 {
	sizes := o.bytes
	if len(sizes) == 0 {
		sizes = bench.DefaultSizes
		if o.compare {
			sizes = bench.DefaultCompareSizes
		}
	}
	copies := uint64(1)
	switch {
	case o.compare && o.g.store == "":
		copies = 4
	case o.compare:
		copies = 2
	}
	return copies * uint64(slices.Max(sizes))
}

// profileDir creates --cpuprofile-dir dir, if given, and returns it; a
// directory that cannot be created is a usage error naming the flag.
func profileDir(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", usagef("--cpuprofile-dir %s cannot be created (%v)", dir, unwrapPath(err))
	}
	return dir, nil
}

// printReport prints a bench report as a table, or as JSON with --json.
func printReport(w io.Writer, asJSON bool, rep interface {
	JSON() ([]byte, error)
	Write(io.Writer) error
}) error {
	if !asJSON {
		return rep.Write(w)
	}
	b, err := rep.JSON()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func (o *benchOptions) run(ctx context.Context, s streams) error {
	g := o.g
	data, err := benchData(g, o.diskNeed(), "--size")
	if err != nil {
		return err
	}
	if o.compare {
		return o.runCompare(ctx, s, data)
	}
	cfg := bench.Config{StoreURL: g.store, Log: s.err}
	cfg.Dir, cfg.Rounds, cfg.NoSDKBaseline, cfg.Sizes = data, o.rounds, o.noSDK, o.bytes
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if err := printReport(s.out, g.json, rep); err != nil {
		return err
	}
	if !rep.Passed() {
		return fmt.Errorf("bench: a check failed (see the table)")
	}
	return nil
}

package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/bench"
)

func newBench(g *globals) *cobra.Command {
	var sizes []string
	var rounds int
	var noSDK bool
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
same part size, concurrency and SHA-256 checksums, and a GetObject streamed
to io.Discard (under payloads/<tenant>-sdk/, deleted afterwards).
claimcheck's throughput is printed as a share of the SDK's, per phase:
check-in against the upload, open and stream against the download
(--no-sdk-baseline skips it).`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := bench.Config{StoreURL: g.store, Log: cmd.ErrOrStderr()}
			data, err := filepath.Abs(g.data)
			if err != nil {
				return err
			}
			if err := ensureWritable(data); err != nil {
				return err
			}
			cfg.Dir = data
			if rounds < 1 || rounds > 20 {
				return usagef("--rounds %d: use 1 to 20", rounds)
			}
			cfg.Rounds = rounds
			cfg.NoSDKBaseline = noSDK
			for _, s := range sizes {
				n, err := humanize.ParseBytes(s)
				if err != nil || n == 0 || n > 64<<30 {
					return usagef("--size %q: want a size between 1 B and 64 GiB such as 4MiB or 1GiB", s)
				}
				cfg.Sizes = append(cfg.Sizes, int64(n))
			}
			rep, err := bench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if err := printReport(cmd, g, rep); err != nil {
				return err
			}
			if !rep.Passed() {
				return fmt.Errorf("bench: a check failed (see the table)")
			}
			return nil
		},
	}
	c.Flags().StringArrayVar(&sizes, "size", nil, "payload size, e.g. 4MiB, 1GiB, 123456 (repeatable; default 4MiB and 1GiB)")
	c.Flags().BoolVar(&noSDK, "no-sdk-baseline", false, "on an s3:// store, skip the plain AWS SDK upload and download that claimcheck is compared with")
	c.Flags().IntVar(&rounds, "rounds", 1, "measure each size this many times per variant and report the fastest round (steadier ratios on a busy machine)")
	c.AddCommand(newBenchRelay(g))
	return c
}

// printReport prints a bench report as a table, or as JSON with --json.
func printReport(cmd *cobra.Command, g *globals, rep interface {
	JSON() ([]byte, error)
	Write(io.Writer) error
}) error {
	if !g.json {
		return rep.Write(cmd.OutOrStdout())
	}
	b, err := rep.JSON()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
	return err
}

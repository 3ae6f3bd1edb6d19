package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/ops"
	"github.com/claimcheck/claimcheck/pipeline"
)

func newDoctor(g *globals) *cobra.Command {
	var in retentionFlags
	c := &cobra.Command{
		Use:   "doctor [--backlog D] [--retry-window D] [--dead-letter D] [--replay-margin D] [--results-extra D]",
		Short: "Check the live configuration and print a pass/fail table",
		Long: `Read the configuration every command uses (--store, --database, --keeper,
--secret, --inline-threshold, ...) and check what it relies on, printing one
line per check; exit 1 if any fails:

  store                  a probe is written under payloads/claimcheck-doctor/
                         and results/claimcheck-doctor/, read back verified,
                         and deleted
  credentials            the credentials in use can read what workers read
                         (access denied is reported as such: a configuration
                         failure, not a missing payload)
  keeper                 an encrypted probe is checked in and claimed back:
                         the keeper wraps and unwraps a data key
  retention              the minimum lifetimes, from the same flags as
                         "claimcheck retention"
  expiry payloads/       S3: the bucket's actual lifecycle rules expire
  expiry results/        nothing there sooner than that (read with
                         GetBucketLifecycleConfiguration); file store: the
                         sweeper enforces expiry
  dead-letter retention  the pipeline's dead-letter retention is counted in
                         the sum and fits inside the payloads' lifetime
  inline threshold       an inline ticket fits the transport's maximum
                         message size (256 KiB)

A warning (no expiry rule at all, no keeper) does not fail the run.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := in.compute(g)
			if err != nil {
				return err
			}
			threshold := g.inlineThreshold
			if threshold == 0 || g.alwaysOffload {
				threshold = -1
			}
			var rep *ops.Report
			e, err := g.open(cmd.Context())
			if err != nil {
				// Report what can be checked without an open store and
				// pipeline: a threshold pipeline.Open refuses shows here.
				rep = &ops.Report{Checks: []ops.Check{
					{Name: "configuration", Status: ops.StatusFail, Detail: "cannot open the store and job database: " + strings.TrimPrefix(err.Error(), "claimcheck: ")},
					ops.CheckInlineThreshold(threshold, pipeline.DefaultMaxMessageSize),
				}}
			} else {
				defer e.Close()
				if rep, err = ops.Doctor(cmd.Context(), ops.DoctorOptions{Pipeline: e.pipe, Retention: r, StoreURL: g.store}); err != nil {
					return err
				}
			}
			return finishChecks(cmd.OutOrStdout(), g.json, "doctor", rep)
		},
	}
	in.register(c.Flags())
	return c
}

// finishChecks prints a report as a table (or JSON) and returns an error
// naming the failed checks, if any.
func finishChecks(w io.Writer, asJSON bool, what string, rep *ops.Report) error {
	failed := rep.Failed()
	if asJSON {
		out := struct {
			OK      bool        `json:"ok"`
			Checks  []ops.Check `json:"checks"`
			Elapsed string      `json:"elapsed"`
		}{len(failed) == 0, rep.Checks, rep.Elapsed.Round(time.Millisecond).String()}
		if err := printJSON(w, out); err != nil {
			return err
		}
	} else {
		printChecks(w, rep)
		counts := map[ops.Status]int{}
		for _, c := range rep.Checks {
			counts[c.Status]++
		}
		verdict := "OK"
		if len(failed) > 0 {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "\n%s %s: %d pass, %d warn, %d fail", what, verdict, counts[ops.StatusPass], counts[ops.StatusWarn], counts[ops.StatusFail])
		if n := counts[ops.StatusSkip]; n > 0 {
			fmt.Fprintf(w, ", %d skipped", n)
		}
		if rep.Elapsed > 0 {
			fmt.Fprintf(w, " (%s)", claimcheck.FormatDuration(rep.Elapsed.Round(10*time.Millisecond)))
		}
		fmt.Fprintln(w)
	}
	if len(failed) == 0 {
		return nil
	}
	names := make([]string, len(failed))
	for i, c := range failed {
		names[i] = c.Name
	}
	return fmt.Errorf("%s: %d of %d checks failed: %s", what, len(failed), len(rep.Checks), strings.Join(names, ", "))
}

// printChecks writes one line per check, the detail wrapped under it.
func printChecks(w io.Writer, rep *ops.Report) {
	width := len("CHECK")
	for _, c := range rep.Checks {
		width = max(width, len(c.Name))
	}
	fmt.Fprintf(w, "%-*s  %-4s  %s\n", width, "CHECK", "", "DETAIL")
	indent := strings.Repeat(" ", width+8)
	for _, c := range rep.Checks {
		lines := wrapWords(c.Detail, 100)
		fmt.Fprintf(w, "%-*s  %-4s  %s\n", width, c.Name, strings.ToUpper(string(c.Status)), lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "%s%s\n", indent, l)
		}
	}
}

// wrapWords splits s into lines of at most width bytes at spaces (a longer word
// gets a line of its own).
func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	return append(lines, line)
}

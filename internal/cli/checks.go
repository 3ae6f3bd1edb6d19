package cli

// Printing the pass/fail report of doctor and verify.

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/ops"
)

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

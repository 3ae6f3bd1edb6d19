// Package clidoc writes docs/cli.md, the reference of every claimcheck
// command and flag, from the command tree itself with cobra's documentation
// generator (github.com/spf13/cobra/doc), so the reference cannot drift from
// the command: a test compares the committed file with a fresh one, and
// `go run ./internal/tools/gendocs` rewrites it.
package clidoc

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/claimcheck/claimcheck/internal/cli"
)

// Path is the reference's path from the module root.
const Path = "docs/cli.md"

// Write writes the reference of every command, one section each in the
// order of a depth-first walk of the tree, with the flags' defaults as they
// are with no CLAIMCHECK_* variable set (it unsets them in this process,
// so call it from a generator or a test only).
func Write(w io.Writer) error {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "CLAIMCHECK_") && !strings.HasPrefix(name, "CLAIMCHECK_TEST_") {
			os.Unsetenv(name)
		}
	}
	root := cli.Root()
	root.DisableAutoGenTag = true
	var buf bytes.Buffer
	buf.WriteString("# Command reference\n\n" +
		"Generated from the command by `go run ./internal/tools/gendocs` (cobra's\n" +
		"documentation generator); a test fails when it is out of date. The prose\n" +
		"guide to the commands is [guide.md](guide.md).\n\n")
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if !c.IsAvailableCommand() && c != root {
			return nil
		}
		c.DisableAutoGenTag = true
		var sec bytes.Buffer
		if err := doc.GenMarkdownCustom(c, &sec, anchor); err != nil {
			return fmt.Errorf("clidoc: %s: %w", c.CommandPath(), err)
		}
		// cobra heads each command "## path"; nest them under this page's title.
		buf.WriteString(strings.ReplaceAll(sec.String(), "\n### ", "\n#### "))
		buf.WriteString("\n")
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return err
	}
	_, err := w.Write(bytes.TrimRight(buf.Bytes(), "\n"))
	if err == nil {
		_, err = io.WriteString(w, "\n")
	}
	return err
}

// anchor turns cobra's per-command file name (claimcheck_dead_replay.md)
// into a link to that command's section of this one page.
func anchor(name string) string {
	return "#" + strings.ReplaceAll(strings.TrimSuffix(name, ".md"), "_", "-")
}

package main

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/claimcheck/claimcheck/internal/cli"
)

// TestDocCommands resolves every claimcheck-bench command in the
// documents' shell blocks (```sh), written `go run ./cmd/claimcheck-bench
// ARGS` or `claimcheck-bench ARGS`, against this command's tree: its
// subcommands, flags and arguments (internal/cli's TestDocShellBlocks
// checks the claimcheck ones and that the package exists).
func TestDocCommands(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"))
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in := false
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch {
			case strings.HasPrefix(line, "```"):
				in = !in && line == "```sh"
				continue
			case !in:
				continue
			}
			args := strings.Fields(line)
			switch {
			case len(args) > 2 && args[0] == "go" && args[1] == "run" && args[2] == "./cmd/claimcheck-bench":
				args = args[3:]
			case len(args) > 0 && args[0] == "claimcheck-bench":
				args = args[1:]
			default:
				continue
			}
			where := filepath.Base(f) + ": " + line
			root := cli.RootWith(extend)
			cmd, rest, err := root.Find(args)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil && !errors.Is(err, pflag.ErrHelp) {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no claimcheck-bench command found in the documents' shell blocks (docs/development.md shows one)")
	}
}

package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"mvdan.cc/sh/v3/syntax"
)

// shellBlocks returns the ```sh blocks of the Markdown file path.
func shellBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)\n```").FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// words are a call's arguments as the shell would pass them, an argument
// holding an expansion ($VAR, $(cmd)) given as "x"; args of a here
// document or a glob are kept as written.
func words(call *syntax.CallExpr) []string {
	var out []string
	for _, w := range call.Args {
		if lit := w.Lit(); lit != "" {
			out = append(out, lit)
			continue
		}
		var sb strings.Builder
		expanded := false
		for _, p := range w.Parts {
			switch p := p.(type) {
			case *syntax.Lit:
				sb.WriteString(p.Value)
			case *syntax.SglQuoted:
				sb.WriteString(p.Value)
			case *syntax.DblQuoted:
				for _, q := range p.Parts {
					if l, ok := q.(*syntax.Lit); ok {
						sb.WriteString(l.Value)
					} else {
						expanded = true
					}
				}
			default:
				expanded = true
			}
		}
		if expanded {
			out = append(out, "x")
		} else {
			out = append(out, sb.String())
		}
	}
	return out
}

// TestDocShellBlocks: every shell block a user would paste from the README,
// docs/ and clients/README.md parses as shell (mvdan.cc/sh), and in it every
// claimcheck command names a command that exists with flags it takes and
// arguments it accepts (cobra's own parsing, not run), every Go package,
// script and client program it runs is in the repository, and every
// testdata path it names exists. Running them needs servers and state; the
// tests that run the same steps are TestScaleOutTwoHosts (the README's
// scale-out), TestRunNoArguments and the clients' TestClientsAPI.
func TestDocShellBlocks(t *testing.T) {
	root := "../.."
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "clients", "README.md"))
	exists := func(rel string) bool {
		matches, _ := filepath.Glob(filepath.Join(root, rel))
		return len(matches) > 0
	}
	checked := 0
	for _, f := range files {
		for i, block := range shellBlocks(t, f) {
			name := filepath.Base(f)
			prog, err := syntax.NewParser().Parse(strings.NewReader(block), name)
			if err != nil {
				t.Errorf("%s, shell block %d does not parse: %v", name, i+1, err)
				continue
			}
			syntax.Walk(prog, func(n syntax.Node) bool {
				call, ok := n.(*syntax.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				args := words(call)
				where := name + ": " + strings.Join(args, " ")
				switch {
				case args[0] == "claimcheck":
					checkCommand(t, where, args[1:])
				case len(args) > 2 && args[0] == "go" && args[1] == "run" && args[2] == "./cmd/claimcheck":
					checkCommand(t, where, args[3:])
				case args[0] == "go" && len(args) > 1 && (args[1] == "run" || args[1] == "install" || args[1] == "test"):
					for _, a := range args[2:] {
						if strings.HasPrefix(a, "./") && !exists(strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/")) {
							t.Errorf("%s: no package %s", where, a)
						}
					}
				case strings.HasPrefix(args[0], "scripts/"), args[0] == "python3" || args[0] == "node":
					prog := args[0]
					if !strings.HasPrefix(prog, "scripts/") {
						prog = args[1]
					}
					if !exists(prog) {
						t.Errorf("%s: no %s in the repository", where, prog)
					}
				default:
					return true
				}
				for _, a := range args {
					if _, path, ok := strings.Cut(a, "testdata/"); ok && !exists("testdata/"+path) {
						t.Errorf("%s: no testdata/%s", where, path)
					}
				}
				checked++
				return true
			})
		}
	}
	if checked < 30 {
		t.Errorf("checked %d commands in the documents' shell blocks, want at least 30: is the block syntax (```sh) still found?", checked)
	}
}

// checkCommand resolves args through the command tree and parses its flags
// and arguments as cobra would before running it.
func checkCommand(t *testing.T, where string, args []string) {
	t.Helper()
	root := newRoot(io.Discard)
	root.InitDefaultCompletionCmd() // added by Execute
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if err := cmd.ParseFlags(rest); err != nil && !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("%s: %v", where, err)
		return
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil && !cmd.HasSubCommands() {
		t.Errorf("%s: %v", where, err)
	}
}

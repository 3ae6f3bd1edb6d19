// Package corpus locates the test documents of a claimcheck clone
// (testdata/pdf) and makes their large one, big.pdf, which the module does
// not ship, by running the Go tool on internal/tools/mkbigpdf: the merge
// itself (internal/bigpdf, pdfcpu's api package) stays out of the command,
// whose every start would otherwise pay its dependencies' package inits.
package corpus

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Dir is the corpus directory relative to a clone's root.
var Dir = filepath.Join("testdata", "pdf")

// Big document: its file name in Dir, its page count, and the bounds of
// its size in bytes (40 MiB and 48 MiB; pdfcpu's merge varies it by a few
// KB from run to run, so nothing may pin its exact size or digest).
const (
	BigName    = "big.pdf"
	BigPages   = 10515
	BigMinSize = 40 << 20
	BigMaxSize = 48 << 20
)

// ErrNoGo is returned by EnsureBig when the go command is not on PATH.
var ErrNoGo = errors.New("the go command is not on PATH")

// EnsureBig returns the path of big.pdf in dir, making it first when it is
// not there with `go run ./internal/tools/mkbigpdf -in DIR` run in root,
// the clone's root (about a minute on two cores; the tool writes it beside
// its final name and renames it into place, so concurrent callers each see
// a whole file). Errors: ErrNoGo, or the tool's failure with its output.
func EnsureBig(root, dir string) (string, error) {
	path := filepath.Join(dir, BigName)
	if fi, err := os.Stat(path); err == nil && fi.Size() >= BigMinSize {
		return path, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("make %s: %w", path, ErrNoGo)
	}
	cmd := exec.Command("go", "run", "./internal/tools/mkbigpdf", "-in", abs)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make %s with go run ./internal/tools/mkbigpdf: %v\n%s", path, err, out)
	}
	return path, nil
}

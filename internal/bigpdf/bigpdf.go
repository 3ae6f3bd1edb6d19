// Package bigpdf makes big.pdf (for internal/tools/mkbigpdf only: the
// command and the tests run that tool through package corpus), the large document of testdata/pdf, on
// first use instead of shipping it in the module (which everyone who runs
// `go get` would download): one valid PDF of 40–48 MiB (10,515 pages)
// merged from the corpus PDFs beside it — octave.pdf nine times, then
// bash.pdf, refcard-a4.pdf, TeXShopAndAsymptote.pdf and pixel.pdf — with
// pdfcpu's api.MergeCreateFile (about a minute on two cores).
//
// The pages and their content are the same on every run, but the bytes are
// not: pdfcpu stamps the Info dictionary dates and the trailer /ID with the
// current time, and writes objects in Go map iteration order, so object
// numbering and layout (and the size, by a few KB) vary between runs. Tests
// must not pin big.pdf's digest or exact size.
package bigpdf

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"github.com/claimcheck/claimcheck/internal/corpus"
)

// The document's name, pages and size bounds (package corpus, which the
// command and the tests use to have it made by internal/tools/mkbigpdf).
const (
	Name    = corpus.BigName
	Pages   = corpus.BigPages
	MinSize = corpus.BigMinSize
	MaxSize = corpus.BigMaxSize
)

// copies of octave.pdf in the merge: what puts the size within the bounds.
const copies = 9

// Ensure returns the path of dir/big.pdf, making it first if it is not
// there (written beside it and renamed into place, so concurrent callers,
// test binaries of several packages say, each see a whole file).
func Ensure(dir string) (string, error) {
	out := filepath.Join(dir, Name)
	if fi, err := os.Stat(out); err == nil && fi.Size() >= MinSize {
		return out, nil
	}
	tmp, err := os.CreateTemp(dir, ".big-*.pdf")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := Make(tmp.Name(), dir); err != nil {
		return "", err
	}
	// CreateTemp made it 0600; the corpus files beside it are readable by all.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}

// Make writes the merged document to out from the corpus PDFs in dir.
func Make(out, dir string) error {
	// Keep pdfcpu from creating or reading a config directory under $HOME.
	api.DisableConfigDir()
	conf := model.NewDefaultConfiguration()
	// No bookmark per merged file (as in api.MergeRaw): the result keeps
	// only the first file's outline.
	conf.CreateBookmarks = false
	// Optimizing would de-duplicate the repeated copies' fonts and images
	// and shrink the result; the point here is size.
	conf.OptimizeBeforeWriting = false
	var files []string
	for range copies {
		files = append(files, filepath.Join(dir, "octave.pdf"))
	}
	for _, name := range []string{"bash.pdf", "refcard-a4.pdf", "TeXShopAndAsymptote.pdf", "pixel.pdf"} {
		files = append(files, filepath.Join(dir, name))
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("bigpdf: corpus file: %w", err)
		}
	}
	if err := api.MergeCreateFile(files, out, false, conf); err != nil {
		return fmt.Errorf("bigpdf: merge: %w", err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		return err
	}
	if n := fi.Size(); n < MinSize || n > MaxSize {
		return fmt.Errorf("bigpdf: %s is %d bytes, want %d..%d", out, n, MinSize, MaxSize)
	}
	return nil
}

// Command mkbigpdf makes testdata/pdf/big.pdf, the large test document: one
// valid PDF of 40–48 MiB (10,515 pages) made by merging the corpus PDFs kept
// in testdata/pdf — octave.pdf nine times, then bash.pdf, refcard-a4.pdf,
// TeXShopAndAsymptote.pdf and pixel.pdf — with pdfcpu's api.MergeCreateFile.
//
// Run it from the module root:
//
//	go run ./internal/tools/mkbigpdf -o testdata/pdf/big.pdf
//
// The pages and their content are the same on every run, but the bytes are
// not: pdfcpu stamps the Info dictionary dates and the trailer /ID with the
// current time, and it writes objects in Go map iteration order, so object
// numbering and layout (and the size, by a few KB) vary between runs. Tests
// must therefore not pin big.pdf's digest or exact size.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
)

const (
	minSize = 40 << 20 // 41,943,040 bytes
	maxSize = 48 << 20 // 50,331,648 bytes
)

func main() {
	out := flag.String("o", "testdata/pdf/big.pdf", "output file")
	dir := flag.String("in", "testdata/pdf", "directory holding the corpus PDFs")
	copies := flag.Int("copies", 9, "how many times to include octave.pdf")
	flag.Parse()

	if err := run(*out, *dir, *copies); err != nil {
		fmt.Fprintln(os.Stderr, "mkbigpdf:", err)
		os.Exit(1)
	}
}

// inputs lists the files to merge, in page order.
func inputs(dir string, copies int) []string {
	var files []string
	for range copies {
		files = append(files, filepath.Join(dir, "octave.pdf"))
	}
	for _, name := range []string{"bash.pdf", "refcard-a4.pdf", "TeXShopAndAsymptote.pdf", "pixel.pdf"} {
		files = append(files, filepath.Join(dir, name))
	}
	return files
}

func run(out, dir string, copies int) error {
	// Keep pdfcpu from creating or reading a config directory under $HOME.
	api.DisableConfigDir()

	conf := model.NewDefaultConfiguration()
	// No bookmark per merged file (as in api.MergeRaw): the result keeps
	// only the first file's outline.
	conf.CreateBookmarks = false
	// Optimizing would de-duplicate the repeated copies' fonts and images
	// and shrink the result; the point here is size.
	conf.OptimizeBeforeWriting = false

	if err := api.MergeCreateFile(inputs(dir, copies), out, false, conf); err != nil {
		return fmt.Errorf("merge: %w", err)
	}

	fi, err := os.Stat(out)
	if err != nil {
		return err
	}
	if n := fi.Size(); n < minSize || n > maxSize {
		return fmt.Errorf("%s is %d bytes, want %d..%d; adjust -copies", out, n, minSize, maxSize)
	}
	fmt.Printf("wrote %s: %d bytes\n", out, fi.Size())
	return nil
}

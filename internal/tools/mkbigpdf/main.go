// Command mkbigpdf makes testdata/pdf/big.pdf, the large test document
// (40–48 MiB, 10,515 pages; package internal/bigpdf), unless it is there:
// the module does not ship it. Run it from the module root before the
// README's main job:
//
//	go run ./internal/tools/mkbigpdf
//
// The tests that need it, and `claimcheck run` with no arguments, run it
// when big.pdf is missing (package corpus); .ci/run runs it first.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/claimcheck/claimcheck/internal/bigpdf"
)

func main() {
	dir := flag.String("in", "testdata/pdf", "directory holding the corpus PDFs; big.pdf is written there")
	flag.Parse()
	path, err := bigpdf.Ensure(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkbigpdf:", err)
		os.Exit(1)
	}
	fi, err := os.Stat(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkbigpdf:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d bytes\n", path, fi.Size())
}

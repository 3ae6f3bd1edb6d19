// Command gendocs writes docs/cli.md, the reference of every claimcheck
// command and flag, from the command tree (package internal/clidoc). Run it
// from the module root after changing a command or flag:
//
//	go run ./internal/tools/gendocs
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/claimcheck/claimcheck/internal/clidoc"
)

func main() {
	var buf bytes.Buffer
	if err := clidoc.Write(&buf); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(clidoc.Path, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d bytes\n", clidoc.Path, buf.Len())
}

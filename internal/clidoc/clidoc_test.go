package clidoc_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/claimcheck/claimcheck/internal/clidoc"
)

// TestReferenceUpToDate: docs/cli.md is what the command tree generates now;
// a flag or command added without regenerating fails here.
func TestReferenceUpToDate(t *testing.T) {
	var fresh bytes.Buffer
	if err := clidoc.Write(&fresh); err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join("..", "..", clidoc.Path))
	if err != nil {
		t.Fatalf("%v: generate it with go run ./internal/tools/gendocs", err)
	}
	if !bytes.Equal(committed, fresh.Bytes()) {
		t.Fatalf("%s is out of date (%d bytes, %d generated): run go run ./internal/tools/gendocs", clidoc.Path, len(committed), fresh.Len())
	}
	for _, want := range []string{"## claimcheck version", "## claimcheck dead replay", "--max-attempts int"} {
		if !bytes.Contains(fresh.Bytes(), []byte(want)) {
			t.Errorf("the generated reference lacks %q", want)
		}
	}
}

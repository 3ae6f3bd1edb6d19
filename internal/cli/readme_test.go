package cli

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestGuideGlobalFlags: the guide's table of global flags (docs/guide.md,
// "Global flags") names every global flag the command has (--broker and
// --destination were missing once).
func TestGuideGlobalFlags(t *testing.T) {
	readme, err := os.ReadFile("../../docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| `--") {
			rows = append(rows, line)
		}
	}
	newRoot(io.Discard).PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		for _, r := range rows {
			if strings.HasPrefix(r, "| `--"+f.Name+"`") || strings.HasPrefix(r, "| `--"+f.Name+" ") {
				return
			}
		}
		t.Errorf("docs/guide.md's global flags table has no row for --%s", f.Name)
	})
}

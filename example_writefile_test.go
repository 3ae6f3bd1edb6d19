package claimcheck_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/claimcheck/claimcheck"
)

// ExamplePayload_WriteFile claims a payload into a file: verified as it is
// written, renamed into place only once it matches its ticket. A ticket
// whose digest does not match leaves nothing at the path.
func ExamplePayload_WriteFile() {
	ctx := context.Background()
	store, dir, done := fileStore(ctx, nil)
	defer done()
	report := bytes.Repeat([]byte("quarterly figures\n"), 10000) // 180,000 bytes: an object
	t, err := store.CheckIn(ctx, "acme", bytes.NewReader(report), &claimcheck.CheckInOptions{ContentType: "text/plain"})
	if err != nil {
		log.Fatal(err)
	}
	p, err := store.Claim(t)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	out := filepath.Join(dir, "report.txt")
	if err := p.WriteFile(ctx, out); err != nil {
		log.Fatal(err)
	}
	fi, _ := os.Stat(out)
	fmt.Println("written:", fi.Size(), "bytes")

	forged := *t
	forged.SHA256 = strings.Repeat("0", 64) // not the payload's
	fp, err := store.Claim(&forged)
	if err != nil {
		log.Fatal(err)
	}
	defer fp.Close()
	other := filepath.Join(dir, "forged.txt")
	err = fp.WriteFile(ctx, other)
	_, statErr := os.Stat(other)
	fmt.Println("corrupt:", errors.Is(err, claimcheck.ErrPayloadCorrupt), "file exists:", statErr == nil)
	// Output:
	// written: 180000 bytes
	// corrupt: true file exists: false
}

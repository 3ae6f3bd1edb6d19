package claimcheck_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"gocloud.dev/secrets"
	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// Example checks a payload into a file:// store, sends its ticket as a
// queue would, and claims the verified bytes back on the worker's side.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "claimcheck-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Producer: store the bytes first, publish the ticket second. This store
	// offloads every payload; by default those up to 64 KiB travel inline.
	store, err := claimcheck.OpenStore(ctx, "file://"+dir, &claimcheck.Options{AlwaysOffload: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader("invoice #1234: 3 widgets"),
		&claimcheck.CheckInOptions{ContentType: "text/plain"})
	if err != nil {
		log.Fatal(err)
	}
	msg, err := ticket.Marshal() // what the queue carries
	if err != nil {
		log.Fatal(err)
	}

	// Worker: parse the ticket, claim the payload, read verified bytes.
	received, err := claimcheck.ParseTicket(msg)
	if err != nil {
		log.Fatal(err)
	}
	payload, err := store.Claim(received)
	if err != nil {
		log.Fatal(err)
	}
	defer payload.Close()
	r, err := payload.Open(ctx) // fetches, checks size and sha256
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	body, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}

	fmt.Println("ticket fits the budget:", len(msg) <= claimcheck.MaxTicketBytes)
	fmt.Println("key:", received.RedactedKey())
	fmt.Println("logged as:", received)
	fmt.Println("payload:", string(body))
	// Output:
	// ticket fits the budget: true
	// key: payloads/acme/…
	// logged as: tenant=acme sha256=70703c85791a… size=24
	// payload: invoice #1234: 3 widgets
}

// ExampleStore_CheckIn_inline shows a small payload travelling inside its
// ticket: no object is written, and claiming it reads nothing from the store.
func ExampleStore_CheckIn_inline() {
	ctx := context.Background()
	store, err := claimcheck.OpenStore(ctx, "mem://", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader("héllo"), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("inline:", ticket.IsInline(), "size:", ticket.Size, "bytes")

	payload, err := store.Claim(ticket)
	if err != nil {
		log.Fatal(err)
	}
	r, err := payload.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(r)
	fmt.Println(string(body))
	// Output:
	// inline: true size: 6 bytes
	// héllo
}

// ExampleKeeperID opens a store with the deployment's shared key, as a Go
// producer next to command-line workers does (README, "Scaling out"): the
// keeper URL is what `claimcheck keys` prints, and KeeperID gives the id
// that every sealed object records and errors name.
func ExampleKeeperID() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "claimcheck-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	key, err := localsecrets.NewRandomKey() // in a deployment: from your secret store
	if err != nil {
		log.Fatal(err)
	}
	keeperURL := "base64key://" + base64.URLEncoding.EncodeToString(key[:])

	keeper, err := secrets.OpenKeeper(ctx, keeperURL)
	if err != nil {
		log.Fatal(err)
	}
	defer keeper.Close()
	id, err := claimcheck.KeeperID(keeperURL)
	if err != nil {
		log.Fatal(err)
	}
	store, err := claimcheck.OpenStore(ctx, "file://"+dir, &claimcheck.Options{Keeper: keeper, KeeperID: id, AlwaysOffload: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader("sealed under the shared key"), nil)
	if err != nil {
		log.Fatal(err)
	}
	info, err := store.Stat(ctx, ticket)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("encrypted:", info.Encrypted)
	fmt.Println("recorded key id is the keeper's:", info.KeyID == id, strings.HasPrefix(id, "local-"))
	// Output:
	// encrypted: true
	// recorded key id is the keeper's: true true
}

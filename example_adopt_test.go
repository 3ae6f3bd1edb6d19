package claimcheck_test

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/claimcheck/claimcheck"
)

// ExampleStore_Adopt takes over an object another tool wrote to the same
// bucket (an AWS extended-client producer's payload, say, whose pointer
// names only its key and size): the size is checked, the bytes are checked
// in under claimcheck's own key, and from then on the ticket's SHA-256
// protects them. The foreign object is left as it is.
func ExampleStore_Adopt() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "claimcheck-adopt-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := claimcheck.OpenStore(ctx, "file://"+dir, &claimcheck.Options{AlwaysOffload: true})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	foreign := []byte(`{"order":42,"lines":3}`)
	if err := store.Bucket().WriteAll(ctx, "imports/order-42.json", foreign, nil); err != nil {
		panic(err)
	}

	t, err := store.Adopt(ctx, "acme", "imports/order-42.json", int64(len(foreign)), nil)
	if err != nil {
		panic(err)
	}
	p, err := store.Claim(t)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	r, err := p.Open(ctx)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	fmt.Println(t.Tenant, t.Size, string(b))

	// A wrong size is refused: the pointer and the object disagree.
	_, err = store.Adopt(ctx, "acme", "imports/order-42.json", 1000, nil)
	fmt.Println(claimcheck.Reason(err))

	// Once processed, the original may go (DeleteAdopted, as the AWS
	// consumers delete it); claimcheck's own objects may not.
	fmt.Println(store.DeleteAdopted(ctx, "imports/order-42.json"))
	fmt.Println(claimcheck.Reason(store.DeleteAdopted(ctx, t.Key)))
	ok, err := store.Bucket().Exists(ctx, store.Namespace()+t.Key)
	fmt.Println(ok, err)
	// Output:
	// acme 22 {"order":42,"lines":3}
	// payload-corrupt
	// <nil>
	// ticket-forbidden
	// true <nil>
}

package temporal_test

import (
	"context"
	"log"

	"github.com/claimcheck/claimcheck"
	_ "github.com/claimcheck/claimcheck/stores/s3store" // s3:// store URLs
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"gocloud.dev/secrets"
	_ "gocloud.dev/secrets/awskms" // awskms:// keeper URLs

	cctemporal "github.com/claimcheck/claimcheck/contrib/temporal"
)

// A worker (and the client that starts workflows) with payloads of 256 KiB
// and more in an S3 bucket, encrypted under a KMS key, in a namespace of
// their own (prefix=temporal/).
func ExampleNew() {
	ctx := context.Background()
	keeper, err := secrets.OpenKeeper(ctx, "awskms://alias/temporal-payloads?region=eu-west-1")
	if err != nil {
		log.Fatal(err)
	}
	defer keeper.Close()
	store, err := claimcheck.OpenStore(ctx, "s3://my-bucket?region=eu-west-1&prefix=temporal/",
		&claimcheck.Options{Keeper: keeper})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // after the client and worker below
	driver, err := cctemporal.New(store, cctemporal.Options{Tenant: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(client.Options{
		HostPort: "localhost:7233",
		ExternalStorage: converter.ExternalStorage{
			Drivers: []converter.StorageDriver{driver},
			// PayloadSizeThreshold: 0 keeps Temporal's default, 256 KiB.
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w := worker.New(c, "orders", worker.Options{}) // inherits the client's ExternalStorage
	// w.RegisterWorkflow(...); w.RegisterActivity(...)
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}

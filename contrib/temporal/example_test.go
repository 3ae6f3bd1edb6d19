package temporal_test

import (
	"context"
	"fmt"
	"log"
	"time"

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

// The retention a driver's objects need: the longest workflow execution,
// plus the namespace's retention, plus a margin, rounded up to whole days.
// At start-up, Driver.CheckRetention(ctx, r) refuses a bucket whose
// lifecycle would expire them sooner.
func ExampleRetention() {
	r, err := cctemporal.Retention(cctemporal.RetentionInputs{
		WorkflowExecution:  30 * 24 * time.Hour, // the WorkflowExecutionTimeout workflows start with
		NamespaceRetention: 30 * 24 * time.Hour, // temporal operator namespace describe
		Margin:             7 * 24 * time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range r.PayloadSteps {
		if s.Add > 0 {
			fmt.Printf("%s: %s\n", s.Name, claimcheck.FormatDuration(s.Add))
		}
	}
	fmt.Println("payloads/ expire after", r.PayloadDays, "days at the soonest")
	// Output:
	// workflow execution timeout: 30d
	// namespace retention: 30d
	// replay margin: 7d
	// payloads/ expire after 67 days at the soonest
}

package cli

// The object stores the command opens (--store URL schemes), each
// registered by importing its package, as gocloud's URL openers are:
// file:// and mem:// come with the root package.
import (
	_ "github.com/claimcheck/claimcheck/stores/gcsstore" // gs://
	_ "github.com/claimcheck/claimcheck/stores/s3store"  // s3://
)

// Command claimcheck moves job payloads of any size through queues with the
// Claim-Check pattern. Run "claimcheck --help" for the subcommands.
package main

import (
	"os"

	"github.com/claimcheck/claimcheck/internal/cli"
)

func main() { os.Exit(cli.Execute()) }

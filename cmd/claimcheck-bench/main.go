// Command claimcheck-bench is the team's comparison harness: the claimcheck
// command tree with the benchmarks that measure claimcheck against plain
// references added to its bench command. The shipped claimcheck command's
// bench measures this deployment's store and database alone; this one adds
//
//	claimcheck-bench bench --compare       claimcheck against the plain store (SHA-256 and the disk, or the AWS SDK)
//	claimcheck-bench bench jobs --compare  the job pipeline against plain River
//	claimcheck-bench bench workload --compare  a size mix against plain River (payload inline) and the store's plain SDK
//	claimcheck-bench bench relay           the outbox relay's peak memory, a large backlog against a small one
//
// with the same global flags as claimcheck. See docs/development.md.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/internal/cli"
)

func main() { os.Exit(cli.ExecuteWith(extend)) }

// extend adds the comparisons to the command tree's bench command and
// names the tree claimcheck-bench.
func extend(root *cobra.Command, l *cli.Lab) {
	root.Use = "claimcheck-bench"
	root.Short = "claimcheck with the team's comparison benchmarks (bench --compare, bench jobs --compare, bench workload --compare, bench relay)"
	b, _, err := root.Find([]string{"bench"})
	if err != nil || b == root {
		panic("claimcheck-bench: the command tree has no bench command")
	}
	addCompare(b, l)
	for _, sub := range []struct {
		name string
		add  func(*cobra.Command, *cli.Lab)
	}{{"jobs", addJobsCompare}, {"workload", addWorkloadCompare}} {
		c, _, err := b.Find([]string{sub.name})
		if err != nil || c == b {
			panic("claimcheck-bench: the command tree has no bench " + sub.name + " command")
		}
		sub.add(c, l)
	}
	b.AddCommand(newBenchRelay(l))
}

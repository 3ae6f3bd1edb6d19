package cli

// Shell completion of flag values and job ids (cobra's completion command
// covers commands and flags; these add what they take).

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimcheck/claimcheck/pipeline"
)

// completeWords completes a flag's value from a fixed list.
func completeWords(words ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(words, cobra.ShellCompDirectiveNoFileComp)
}

// completionJobs is how many job ids completion offers at most: the most
// recent ones of the last completionWindow.
const (
	completionJobs   = 50
	completionWindow = 7 * 24 * time.Hour
)

// completeJobIDs completes a JOB argument with the ids of recent jobs (in
// state, "" for any), each described by its kind, tenant and state. It
// opens the job database read-only, as jobs does, and offers nothing when
// it cannot (no file completion either: a job id is not a path).
func completeJobIDs(g *globals, state string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		e, err := g.open(ctx, openOptions{readOnly: true, noWrites: true})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer e.Close()
		var recent []cobra.Completion // the last completionJobs listed (oldest first)
		_ = e.pipe.List(ctx, pipeline.ListOptions{State: state, Since: time.Now().Add(-completionWindow)}, func(j *pipeline.JobInfo) error {
			recent = append(recent, cobra.CompletionWithDesc(strconv.FormatInt(j.ID, 10), fmt.Sprintf("%s %s %s", j.Kind, j.Tenant, j.State)))
			if len(recent) > completionJobs {
				recent = recent[1:]
			}
			return nil
		})
		return recent, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}

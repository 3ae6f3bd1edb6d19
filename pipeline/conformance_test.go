package pipeline_test

import (
	"testing"

	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/pipeline/pipelinetest"
)

// The job-store conformance suite, on each database the pipeline supports.

func TestConformanceSQLite(t *testing.T) {
	t.Parallel()
	pipelinetest.RunConformance(t, func(t *testing.T) pipeline.Config {
		return pipeline.Config{Database: pipelinetest.SQLiteDatabase(t)}
	})
}

func TestConformancePostgres(t *testing.T) {
	t.Parallel()
	pipelinetest.PostgresURL(t) // skips, saying why, without CLAIMCHECK_TEST_DATABASE_URL
	pipelinetest.RunConformance(t, func(t *testing.T) pipeline.Config {
		return pipeline.Config{Database: pipelinetest.PostgresDatabase(t)}
	})
}

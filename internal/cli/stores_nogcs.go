//go:build !gcs

package cli

// gcsCompiled: without the build tag gcs the command has no gs:// store
// (stores.go); a test build registers it (gcs_test.go) and says so.
var gcsCompiled = false

// Package clients holds no Go code: it is the home of the standard-library
// clients of the HTTP API of `claimcheck serve` (docs/openapi.yaml), in
// Python (clients/python, Python 3.11+) and JavaScript (clients/js,
// Node.js 20+), and of the Go tests that run them against a real serve
// started in-process (api_test.go): each client's own test suite, jobs
// submitted by one language's example program and worked by the other's,
// refusals (a digest mismatch, another tenant's token), and the README's
// snippets (readme_test.go); ticket_test.go runs their ticket checks.
package clients

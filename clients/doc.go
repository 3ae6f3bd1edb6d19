// Package clients holds no Go code: it is the home of the standard-library
// clients of the HTTP API of `claimcheck serve` (docs/openapi.yaml), in
// Python (clients/python, Python 3.11+), JavaScript (clients/js,
// Node.js 20+) and PHP (clients/php, PHP 8.1+ with its curl extension),
// and of the Go tests that run them against a real serve started
// in-process (api_test.go): each client's own test suite, jobs submitted
// by one language's example program and worked by another's, refusals (a
// digest mismatch, another tenant's token), and the README's snippets
// (readme_test.go); ticket_test.go runs the Python and JavaScript ticket
// checks.
package clients

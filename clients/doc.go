// Package clients holds no Go code: it is the home of the standard-library
// clients of the HTTP API of `claimcheck serve` (docs/openapi.yaml), in
// Python (clients/python, Python 3.11+) and JavaScript (clients/js,
// Node.js 20+), and of the Go tests that run them against a real serve
// (clients_test.go): each client's own test suite, and jobs submitted by
// one language's client and worked by the other's.
package clients

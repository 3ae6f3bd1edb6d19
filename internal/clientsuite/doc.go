// Package clientsuite runs the standard-library clients of the HTTP API
// (the module's clients/ directory: Python 3.11+ in clients/python,
// JavaScript for Node.js 20+ in clients/js, PHP 8.1+ with its curl
// extension in clients/php) against a real `claimcheck serve` started
// in-process: each client's own test suite, jobs submitted by one
// language's example program and worked by another's, refusals (a digest
// mismatch, another tenant's token), trace context carried from client to
// worker, the ticket checks of the Python and JavaScript validators, and
// clients/README.md's snippets. It holds no code of its own beside its
// tests; clients/ holds no Go.
package clientsuite

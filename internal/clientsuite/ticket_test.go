package clientsuite_test

import "testing"

// TestTicketCheckers runs the Python and JavaScript clients' ticket checks
// (check_ticket, checkTicket: a validator of docs/ticket.schema.json's
// keywords plus the rules the schema cannot state) against the fixtures
// of testdata/tickets, the same the Go schema test reads
// (ticket_schema_test.go in the module's root). No server is needed.
func TestTicketCheckers(t *testing.T) {
	t.Run("Python", func(t *testing.T) {
		t.Parallel()
		py := pythonClient()
		need(t, py)
		pyUnittest(t, py, "", "tests.test_ticket")
	})
	t.Run("JavaScript", func(t *testing.T) {
		t.Parallel()
		js := jsClient()
		need(t, js)
		nodeTest(t, js, "", "test/ticket.test.js")
	})
}

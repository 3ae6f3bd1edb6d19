// Package claimcheck moves job payloads of any size through queues with the
// Claim-Check pattern: the queue carries a small ticket (at most
// MaxTicketBytes, 512 bytes, whatever the payload), the payload lives in
// object storage, and the worker claims it by ticket, verifies it (size and
// SHA-256) and writes its result back the same way. Payloads up to the
// inline threshold (64 KiB by default) travel inside their ticket instead.
//
// Where to start:
//   - OpenStore (or NewStore over a gocloud.dev/blob bucket) opens a Store;
//     Store.CheckIn stores a payload and returns its Ticket; Store.Claim
//     returns its Payload, whose Open and OpenStream read it back verified;
//     Ticket.Marshal and
//     ParseTicket are the ticket's wire form (docs/ticket.md).
//   - Options: encryption at rest (Keeper, a gocloud.dev/secrets keeper:
//     envelope encryption with Tink), salted keys and signed tickets
//     (Secret, SignTickets), tenants, size limits.
//   - Errors are classified for retrying: Reason and IsPermanent tell a
//     missing or corrupt payload (permanent) from an unavailable store, a
//     refused credential or a failed keeper (transient); see errors.go.
//   - Package pipeline runs jobs over a job database (River: SQLite
//     embedded, PostgreSQL at scale); package broker carries tickets over
//     RabbitMQ, NATS JetStream or SQS with a transactional outbox.
//   - Package storetest is the conformance suite every store passes.
//
// Stores: the root package imports no storage service. file:// and mem://
// come with it; every other service is a package of its own that registers
// its URL scheme when imported, as gocloud's drivers do:
//
//	import _ "github.com/claimcheck/claimcheck/stores/s3store"  // s3://
//	import _ "github.com/claimcheck/claimcheck/stores/gcsstore" // gs://
//
// A store package adds what claimcheck needs beyond gocloud's driver through
// the hook in driver.go (StoreDriver, StoreHooks): S3's server-verified
// SHA-256 checksums, part sizes and server-side encryption, for example.
// docs/stores.md says what each store has and lacks.
//
// The invariants the code relies on are in docs/invariants.md.
package claimcheck

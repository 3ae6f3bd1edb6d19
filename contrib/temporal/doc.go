// Package temporal is a Temporal External Storage driver
// (go.temporal.io/sdk/converter.StorageDriver) over a claimcheck Store: the
// payloads Temporal would otherwise write into a workflow's history are
// checked into the store (any gocloud bucket claimcheck opens: file://,
// s3://, gs://, ...), and the history keeps only a claim holding the
// payload's claimcheck ticket (at most 512 bytes, docs/ticket.md).
//
// What is stored: each payload's protobuf encoding (a *commonpb.Payload:
// its metadata and its data, the data field written last and never copied),
// checked in under the tenant of Options.Tenant with its content address as
// key, always as an object (never inline). The claim is
// {"ticket": "<ticket JSON>"}. Retrieve claims the ticket and reads the
// object back verified, size and SHA-256 (and decrypted when the store has a
// keeper), before decoding a byte of it.
//
// Memory: Store streams each payload into the store without copying its
// data (claimcheck spools or writes it as it hashes); Retrieve holds the
// payload it returns (Temporal's API returns it in memory) and nothing more,
// its data field aliasing the buffer it was read into.
//
// Errors wrap claimcheck's classes, so errors.Is(err,
// claimcheck.ErrPayloadMissing), claimcheck.IsPermanent(err) and
// claimcheck.Reason(err) work on what the driver returns: a missing object,
// a corrupt one and a claim that does not parse are permanent; an
// unavailable store or keeper is transient. See README.md beside this file
// for wiring it into client.Options and for the retention it needs.
package temporal

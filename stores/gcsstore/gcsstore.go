// Package gcsstore adds Google Cloud Storage to claimcheck: importing it
// (the claimcheck command does) makes claimcheck.OpenStore open
//
//	gs://BUCKET[?access_id=...&private_key_path=...&anonymous=true]
//
// through gocloud.dev/blob/gcsblob, which takes every parameter of
// gcsblob's URL opener. Credentials come from Application Default
// Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata
// server), never from a ticket. With STORAGE_EMULATOR_HOST set, gcsblob
// talks to that emulator (fake-gcs-server: scripts/fake-gcs.sh) without
// credentials.
//
// What Cloud Storage gives claimcheck, and what it does not:
//
//   - Conditional create: a check-in's write asks for IfNotExist, which
//     gcsblob sends as the precondition ifGenerationMatch=0 (the object must
//     not exist); a racing second writer gets 412 Precondition Failed, so
//     two check-ins racing for one key cannot both commit, as on S3.
//   - Checksums: Cloud Storage verifies CRC32C and MD5, never SHA-256.
//     cloud.google.com/go/storage computes a CRC32C of the whole object as it
//     streams and sends it with the final request; the server refuses the
//     object if its bytes do not match. That guards the transfer only: the
//     ticket's SHA-256, verified at every claim, remains the end-to-end
//     check, and neither CRC32C nor the MD5 Cloud Storage records is read as
//     the payload's digest.
//   - Lifecycle: `claimcheck lifecycle --format gcs` prints the rules for
//     `gcloud storage buckets update gs://BUCKET --lifecycle-file=...`.
//     `lifecycle apply` and `doctor`'s lifecycle check read and write S3
//     configurations only and say "not supported on this store" for gs://
//     (fake-gcs-server does not keep lifecycle rules, so nothing here could
//     test an implementation). gcsblob uploads through resumable uploads,
//     not XML API multipart uploads: a session left unfinished expires a
//     week after it began (Cloud Storage's documentation on resumable
//     uploads), and the policy's AbortIncompleteMultipartUpload rule covers
//     multipart uploads other tools leave.
//   - No server-side encryption parameters and no presigned URLs:
//     Store.PresignedURL needs a service account's signing credentials
//     (gcsblob's access_id and private_key_path), which the emulator lacks.
package gcsstore

import (
	_ "gocloud.dev/blob/gcsblob" // gs:// URLs
)

// Scheme is the URL scheme this package serves.
const Scheme = "gs"

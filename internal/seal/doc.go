// Package seal encrypts what Airlock keeps for tenants (workspace
// snapshots) so that it never leaves a node in the clear.
//
// Every tenant has one data key (DEK, 32 random bytes); each snapshot is
// encrypted with AES-256-GCM under a key of its own, derived from the data
// key with HKDF-SHA256 over a random salt kept in the stream's header
// (format version 2; streams of version 1, sealed under the data key
// itself with a random nonce prefix, are still read). The data key is
// stored only wrapped: sealed with AES-256-GCM under the operator's master key (GCM as the key wrap,
// with the tenant ID and the data key's ID as additional data, so a
// wrapped key cannot be moved to another tenant; the standard library has
// no AES-KW, and GCM authenticates as well). Master keys have IDs derived
// from their bytes, and every wrapped data key records the ID it was
// wrapped under, so rotating the master key is re-wrapping the data keys
// under the new one (Keys.Rotate): no snapshot is re-encrypted, and old
// snapshots still open.
//
// Streams (Encrypt, Decrypt) are cut into chunks of ChunkSize bytes, each
// sealed on its own, with the chunk's index and a final-chunk flag in its
// nonce and the stream's header as additional data: a stream is never
// held in memory whole, and a flipped byte, a dropped, repeated or
// reordered chunk, or a stream cut short is an error, never silently
// shorter or different plaintext.
//
// The package owns the key formats, the key hierarchy and the stream
// format; it keeps nothing itself (a KeyStore does) and must not touch
// sandboxes, blobs or sessions.
package seal

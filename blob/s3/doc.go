// Package s3 implements airlock.Blobs on an S3-compatible bucket
// (through gocloud.dev/blob and its S3 driver): the artifact and snapshot
// store of a fleet, where every node must read what any node wrote. A
// single node keeps the local directory of package blobdir.
//
// It owns the objects under its bucket and optional prefix and nothing
// else. Keys follow blobdir's rules (blobdir.ValidateKey), so a key valid
// on one store is valid on the other. An object appears whole or not at
// all: a Put whose reader or context fails aborts the upload.
//
// Credentials never come from the bucket URL (one with user information
// is refused): the AWS SDK reads them from the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the
// shared config files or the instance role. Nothing here logs them.
//
// It stores bytes by key and knows nothing of tenants or executions, and
// must not import any implementation package but blobdir (for the key
// rules).
package s3

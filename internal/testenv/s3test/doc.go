// Package s3test starts a real S3-compatible server for tests: the
// Versity S3 gateway (versitygw, "versitygw posix DIR": S3 over a
// directory), built from the Go module proxy by scripts/test.sh, on a
// loopback port of its own with a temporary data directory, one root
// access key and one bucket. It owns that process and directory and ends
// both at the test's cleanup.
//
// A machine without the versitygw binary skips the test through testreq
// (so with AIRLOCK_TEST_REQUIRE=1 it fails). The server binds loopback
// only and is given its keys through its environment, not its command
// line. Nothing here is used by airlockd itself.
package s3test

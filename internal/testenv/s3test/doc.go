// Package s3test starts a real S3-compatible server for tests:
// SeaweedFS ("weed server" with its S3 gateway), built from the Go module
// proxy by scripts/setup.sh, on loopback ports of its own with a
// temporary data directory, one access key and one bucket. It owns that
// process and directory and ends both at the test's cleanup.
//
// A machine without the weed binary skips the test through testreq (so
// with AIRLOCK_TEST_REQUIRE=1 it fails). The server is told not to report
// statistics anywhere and binds loopback only. Nothing here is used by
// airlockd itself.
package s3test

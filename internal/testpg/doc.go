// Package testpg starts throwaway PostgreSQL servers for tests: initdb in
// a temporary directory, a server that listens only on a unix socket in
// that directory (no TCP port, so it never meets another server, such as
// the cluster Debian's package starts), run as the postgres system user
// when the test runs as root (PostgreSQL refuses root). Tests get a
// database of their own on one server per test binary, so they can run
// in parallel.
//
// It owns the servers it starts and their directories: it stops each
// server (fast shutdown, then SIGKILL) and removes its directory when the
// test binary's tests end, also when they fail; a server whose test
// binary dies without stopping it gets SIGQUIT from the kernel (a parent
// death signal). It must not touch any other PostgreSQL server or
// cluster on the machine.
//
// Where PostgreSQL's binaries are missing, a test that asks for a
// database is skipped through testreq (and fails with
// AIRLOCK_TEST_REQUIRE=1).
package testpg

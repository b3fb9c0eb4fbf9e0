// Package e2e holds end-to-end tests of Airlock: the real service (SQLite
// store, blob directory, built images, gVisor backend, manager and HTTP API)
// driven over loopback HTTP by the typed client and by raw net/http, and the
// airlockd binary itself killed and restarted to check crash recovery.
//
// It has no library code: only _test.go files. The tests need root, runsc
// and the images scripts/setup.sh builds, and skip with a reason without
// them. They must not touch other packages' state: each test makes its own
// temporary state directory and cgroup parent and talks only to loopback.
//
// The documentation is checked here too: TestQuickstart runs the README's
// quickstart blocks and the files in examples/ against a real airlockd,
// and TestDocsLinks (which needs nothing of the machine) checks every
// relative link of README.md, BENCHMARKS.md and docs/.
package e2e

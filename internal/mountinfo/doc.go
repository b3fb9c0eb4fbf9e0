// Package mountinfo reads /proc/<pid>/mountinfo (proc(5)): the one parser
// of the mount table for the loop-disk helper, the image builder and the
// conformance suite's host check. The table can hold names chosen inside
// a sandbox (mount points are paths), so lines are bounded and anything
// malformed is skipped, never trusted.
package mountinfo

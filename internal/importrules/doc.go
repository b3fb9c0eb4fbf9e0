// Package importrules holds the test that keeps the layout's import rules:
// which group of packages may import which. It has no code of its own; the
// rules are in rules_test.go and are written down in docs/development.md.
package importrules

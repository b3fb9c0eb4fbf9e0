// Package migrations reads a store's numbered SQL migrations
// (NNNN_description.sql) from an embedded file system, in version order.
// Each store (sqlite, postgres) owns its files and applies them in its own
// dialect and transactions; this package only finds and orders them.
package migrations

// Package migrations holds the one set of numbered SQL migrations of the
// SQL store (package store) and reads them for a dialect.
//
// A version is NNNN_description.sql, written once for both dialects, and
// optionally NNNN_description.<dialect>.sql (sqlite, postgres) where the
// SQL must differ; a version's dialect file runs before its shared file,
// in the same transaction. In the shared files a few words in double
// braces stand for the types that differ (see Words): {{int}} is a 64-bit
// integer, {{bool}} and {{false}} a boolean and its false, {{json}} a JSON
// document, {{bytes}} a byte string, {{serial}} an increasing integer
// primary key that is never reused. They expand to exactly the types
// each store used before the two were one, so a database made by either
// keeps its schema.
//
// It only finds, orders and expands the files; the store applies them.
package migrations

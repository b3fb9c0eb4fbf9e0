// Package storetest is the one behaviour suite of Airlock's metadata
// stores: every store implementation (sqlite, postgres) runs it from its
// own tests with Run and a Backend that makes and opens its databases.
// What only one implementation has (SQLite's file and lock behaviour,
// PostgreSQL's migration lock and server loss) stays in that package's
// tests.
//
// It owns no store and no database: each test asks the Backend for a new
// one. It must not import an implementation package.
package storetest

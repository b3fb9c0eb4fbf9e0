package guard

import (
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqlitePreparer asks SQLite's own parser about a statement: it prepares
// it (never steps it) in an empty in-memory database with an authorizer
// that notes ATTACH and calls of load_extension. A statement that names a
// table an earlier statement of the script makes does not prepare there;
// then the tokens decide (sql.go).
type sqlitePreparer struct {
	tls  *libc.TLS
	db   uintptr
	id   uintptr
	seen *authorized
}

// authorized is what the authorizer saw during one prepare.
type authorized struct {
	attach, loadExtension bool
}

// The authorizer is one C function pointer for every connection; its
// argument names the connection's record here.
var (
	authorizations sync.Map // uintptr -> *authorized
	authorizerIDs  atomic.Uintptr
	authorizerFunc = cFunc(authorize)
)

// cFunc turns a Go function declaration into the function pointer the
// transpiled SQLite calls (the layout modernc.org/sqlite relies on for
// its own callbacks: a func value is a pointer to its code).
func cFunc[T any](f T) uintptr { return *(*uintptr)(unsafe.Pointer(&struct{ f T }{f})) }

func authorize(tls *libc.TLS, arg uintptr, action int32, z1, z2, zDB, zTrigger uintptr) int32 {
	v, ok := authorizations.Load(arg)
	if !ok {
		return sqlite3.SQLITE_OK
	}
	a := v.(*authorized)
	switch action {
	case sqlite3.SQLITE_ATTACH:
		a.attach = true
	case sqlite3.SQLITE_FUNCTION:
		if z2 != 0 && strings.EqualFold(libc.GoString(z2), "load_extension") {
			a.loadExtension = true
		}
	}
	return sqlite3.SQLITE_OK
}

// newSQLitePreparer opens the empty database; nil if it cannot.
func newSQLitePreparer() *sqlitePreparer {
	tls := libc.NewTLS()
	name, err := libc.CString(":memory:")
	if err != nil {
		tls.Close()
		return nil
	}
	defer libc.Xfree(tls, name)
	out := libc.Xmalloc(tls, 8) // SQLite's memory: it writes the handle there
	if out == 0 {
		tls.Close()
		return nil
	}
	defer libc.Xfree(tls, out)
	rc := sqlite3.Xsqlite3_open_v2(tls, name, out, sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_MEMORY, 0)
	db := readPointer(out)
	if rc != sqlite3.SQLITE_OK {
		if db != 0 {
			sqlite3.Xsqlite3_close(tls, db)
		}
		tls.Close()
		return nil
	}
	p := &sqlitePreparer{tls: tls, db: db, id: authorizerIDs.Add(1), seen: &authorized{}}
	// Bounds of SQLite's own: what a statement may hold.
	sqlite3.Xsqlite3_limit(tls, p.db, sqlite3.SQLITE_LIMIT_SQL_LENGTH, maxPreparedBytes)
	sqlite3.Xsqlite3_limit(tls, p.db, sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 500)
	authorizations.Store(p.id, p.seen)
	sqlite3.Xsqlite3_set_authorizer(tls, p.db, authorizerFunc, p.id)
	return p
}

// maxPreparedBytes bounds a statement given to SQLite.
const maxPreparedBytes = 256 << 10

// prepare reports what SQLite's parser saw in stmt (one statement); ok
// is false if it did not prepare.
func (p *sqlitePreparer) prepare(stmt string) (seen authorized, ok bool) {
	if p == nil || len(stmt) > maxPreparedBytes || strings.IndexByte(stmt, 0) >= 0 {
		return seen, false
	}
	z, err := libc.CString(stmt)
	if err != nil {
		return seen, false
	}
	defer libc.Xfree(p.tls, z)
	out := libc.Xmalloc(p.tls, 8)
	if out == 0 {
		return seen, false
	}
	defer libc.Xfree(p.tls, out)
	*p.seen = authorized{}
	rc := sqlite3.Xsqlite3_prepare_v2(p.tls, p.db, z, -1, out, 0)
	if st := readPointer(out); st != 0 {
		sqlite3.Xsqlite3_finalize(p.tls, st)
	}
	return *p.seen, rc == sqlite3.SQLITE_OK
}

// readPointer reads the pointer SQLite wrote at p (its memory).
func readPointer(p uintptr) uintptr {
	return uintptr(binary.LittleEndian.Uint64(libc.GoBytes(p, 8)))
}

func (p *sqlitePreparer) close() {
	if p == nil {
		return
	}
	authorizations.Delete(p.id)
	sqlite3.Xsqlite3_close(p.tls, p.db)
	p.tls.Close()
}

package guard

import (
	"sync"
	"testing"
)

// SQLite's own parser, through the authorizer: what it sees in a
// statement that prepares, and that a statement it cannot prepare says
// so (the tokens decide then).
func TestSQLitePrepare(t *testing.T) {
	tests := []struct {
		stmt   string
		want   authorized
		wantOK bool
	}{
		{"ATTACH DATABASE '/tmp/x.db' AS x;", authorized{attach: true}, true},
		{"EXPLAIN ATTACH 'x.db' AS x", authorized{attach: true}, true},
		{"SELECT load_extension('/tmp/x.so');", authorized{loadExtension: true}, true},
		{"SELECT 1 WHERE 0 AND \"LOAD_EXTENSION\"('x', 'y')", authorized{loadExtension: true}, true},
		{"SELECT 'load_extension(x)', 'ATTACH'", authorized{}, true},
		{"SELECT load_extension FROM missing", authorized{}, false},
		{"SELEKT 1", authorized{}, false},
	}
	var wg sync.WaitGroup
	for range 4 { // connections of their own, at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := newSQLitePreparer()
			if p == nil {
				t.Error("no in-memory database")
				return
			}
			defer p.close()
			for _, tt := range tests {
				got, ok := p.prepare(tt.stmt)
				if got != tt.want || ok != tt.wantOK {
					t.Errorf("%q: saw %+v prepared %v, want %+v %v", tt.stmt, got, ok, tt.want, tt.wantOK)
				}
			}
		}()
	}
	wg.Wait()
}

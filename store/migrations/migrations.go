package migrations

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered file, e.g. 0001_init.sql.
type Migration struct {
	Version int
	Name    string // the file's base name
	SQL     string
}

// Load reads the files matching pattern (e.g. "migrations/*.sql") in
// fsys, in version order. A name that is not NNNN_description.sql, or two
// files of one version, is an error; errors start with store (the
// package loading them).
func Load(fsys fs.FS, pattern, store string) ([]Migration, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: migration %s: name must be NNNN_description.sql", store, base)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("%s: migrations %s and %s share version %d", store, other, base, v)
		}
		seen[v] = base
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

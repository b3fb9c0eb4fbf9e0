package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed *.sql
var files embed.FS

// Dialects names the dialects the migrations are written for.
var Dialects = []string{"sqlite", "postgres"}

// Words are the type words of each dialect.
var Words = map[string]map[string]string{
	"sqlite": {
		"int":    "INTEGER",
		"bool":   "INTEGER",
		"false":  "0",
		"json":   "TEXT",
		"bytes":  "BLOB",
		"serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
	},
	"postgres": {
		"int":    "BIGINT",
		"bool":   "BOOLEAN",
		"false":  "false",
		"json":   "JSONB",
		"bytes":  "BYTEA",
		"serial": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
	},
}

// Migration is one version, its SQL for one dialect.
type Migration struct {
	Version int
	Name    string // the shared file's base name (else the dialect file's)
	SQL     string
}

// For returns the migrations of the dialect in version order.
func For(dialect string) ([]Migration, error) {
	return Load(files, ".", dialect)
}

var word = regexp.MustCompile(`\{\{(\w+)\}\}`)

// Load reads the migrations of dialect in dir of fsys, in version order.
// A name that is not NNNN_description.sql or NNNN_description.DIALECT.sql,
// two shared (or two dialect) files of one version, an unknown dialect
// and an unknown word are errors.
func Load(fsys fs.FS, dir, dialect string) ([]Migration, error) {
	words, ok := Words[dialect]
	if !ok {
		return nil, fmt.Errorf("migrations: unknown dialect %q", dialect)
	}
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	type parts struct {
		name, shared, own string
		hasShared, hasOwn bool
	}
	byVersion := map[int]*parts{}
	for _, name := range names {
		base := path.Base(name)
		num, rest, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: migration %s: name must be NNNN_description.sql", dialect, base)
		}
		stem := strings.TrimSuffix(rest, ".sql")
		desc, of, dialectFile := strings.Cut(stem, ".")
		if dialectFile && !known(of) || desc == "" {
			return nil, fmt.Errorf("%s: migration %s: name must be NNNN_description.sql or NNNN_description.DIALECT.sql", dialect, base)
		}
		if dialectFile && of != dialect {
			continue
		}
		p := byVersion[v]
		if p == nil {
			p = &parts{}
			byVersion[v] = p
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		slot, has := &p.shared, &p.hasShared
		if dialectFile {
			slot, has = &p.own, &p.hasOwn
		}
		if *has || (p.name != "" && !strings.HasPrefix(p.name, num+"_"+desc+".")) {
			return nil, fmt.Errorf("%s: migrations %s and %s share version %d", dialect, p.name, base, v)
		}
		*slot, *has = string(b), true
		if !dialectFile || p.name == "" {
			p.name = base
		}
	}
	var ms []Migration
	for v, p := range byVersion {
		sql := p.shared
		if p.own != "" {
			sql = p.own + "\n" + p.shared
		}
		var bad []string
		sql = word.ReplaceAllStringFunc(sql, func(w string) string {
			t, ok := words[w[2:len(w)-2]]
			if !ok {
				bad = append(bad, w)
			}
			return t
		})
		if bad != nil {
			return nil, fmt.Errorf("%s: migration %s: unknown words %v", dialect, p.name, bad)
		}
		ms = append(ms, Migration{Version: v, Name: p.name, SQL: sql})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

func known(dialect string) bool {
	_, ok := Words[dialect]
	return ok
}

package migrations

import (
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	fsys := fstest.MapFS{
		"m/0010_ten.sql":          file("ten {{int}}"),
		"m/0002_two.sql":          file("two"),
		"m/0002_two.sqlite.sql":   file("sqlite two"),
		"m/0002_two.postgres.sql": file("postgres two"),
		"m/0003_pg.postgres.sql":  file("only postgres"),
		"m/readme.txt":            file("not a migration"),
	}
	ms, err := Load(fsys, "m", "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 2 || ms[0].Name != "0002_two.sql" || ms[0].SQL != "sqlite two\ntwo" ||
		ms[1].Version != 10 || ms[1].SQL != "ten INTEGER" {
		t.Errorf("sqlite: loaded %+v, want 0002 (its own part first) then 0010", ms)
	}
	ms, err = Load(fsys, "m", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[0].SQL != "postgres two\ntwo" || ms[1].Version != 3 || ms[1].Name != "0003_pg.postgres.sql" ||
		ms[2].SQL != "ten BIGINT" {
		t.Errorf("postgres: loaded %+v", ms)
	}
	for name, bad := range map[string]fstest.MapFS{
		"no number":       {"m/init.sql": file("")},
		"zero":            {"m/0000_zero.sql": file("")},
		"shared version":  {"m/0001_a.sql": file(""), "m/01_b.sql": file("")},
		"other name":      {"m/0001_a.sql": file(""), "m/0001_b.sqlite.sql": file("")},
		"unknown dialect": {"m/0001_a.oracle.sql": file("")},
		"unknown word":    {"m/0001_a.sql": file("{{uuid}}")},
	} {
		if _, err := Load(bad, "m", "sqlite"); err == nil || !strings.HasPrefix(err.Error(), "sqlite: ") {
			t.Errorf("%s: error %v, want one starting with the dialect's name", name, err)
		}
	}
	if _, err := Load(fsys, "m", "oracle"); err == nil {
		t.Error("an unknown dialect loaded")
	}
}

// The embedded set: every version in both dialects, numbered 1 up
// without a gap, every word known.
func TestFor(t *testing.T) {
	left := regexp.MustCompile(`\{\{|\}\}`)
	for _, d := range Dialects {
		ms, err := For(d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		for i, m := range ms {
			if m.Version != i+1 {
				t.Fatalf("%s: migration %s is version %d, want %d", d, m.Name, m.Version, i+1)
			}
			if left.MatchString(m.SQL) {
				t.Errorf("%s: migration %s keeps a word", d, m.Name)
			}
		}
	}
}

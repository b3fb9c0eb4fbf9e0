package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	ms, err := Load(fstest.MapFS{
		"m/0010_ten.sql": file("ten"),
		"m/0002_two.sql": file("two"),
		"m/readme.txt":   file("not a migration"),
	}, "m/*.sql", "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 2 || ms[0].Name != "0002_two.sql" || ms[0].SQL != "two" || ms[1].Version != 10 {
		t.Errorf("loaded %+v, want 0002 then 0010", ms)
	}
	for name, bad := range map[string]fstest.MapFS{
		"no number":      {"m/init.sql": file("")},
		"zero":           {"m/0000_zero.sql": file("")},
		"shared version": {"m/0001_a.sql": file(""), "m/01_b.sql": file("")},
	} {
		if _, err := Load(bad, "m/*.sql", "test"); err == nil || !strings.HasPrefix(err.Error(), "test: ") {
			t.Errorf("%s: error %v, want one starting with the store's name", name, err)
		}
	}
}

package mountinfo_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/mountinfo"
)

const sample = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
36 22 0:32 / /var/lib/airlock/x rw shared:2 - tmpfs tmpfs rw
37 36 0:33 / /var/lib/airlock/x/with\040space rw - tmpfs tmpfs rw
38 22 0:4 net:[4026532000] /run/netns/a rw - nsfs nsfs rw
short line
39 36 7:0 / /var/lib/airlock/x/a\134b rw - ext4 /dev/loop0 rw
40 22 0:34 / /var/lib/airlock/xy rw - tmpfs tmpfs rw
`

func TestParse(t *testing.T) {
	ms, err := mountinfo.Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 6 {
		t.Fatalf("parsed %d mounts, want 6: %+v", len(ms), ms)
	}
	if ms[3] != (mountinfo.Mount{Root: "net:[4026532000]", Point: "/run/netns/a"}) {
		t.Errorf("nsfs mount = %+v", ms[3])
	}
	got := mountinfo.Under(ms, "/var/lib/airlock/x")
	want := []string{"/var/lib/airlock/x", "/var/lib/airlock/x/with space", `/var/lib/airlock/x/a\b`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Under = %q, want %q", got, want)
	}
	mountinfo.DeepestFirst(got)
	if got[len(got)-1] != "/var/lib/airlock/x" {
		t.Errorf("DeepestFirst = %q: the parent is not last", got)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        "plain",
		`a\040b`:       "a b",
		`\011\012\134`: "\t\n\\",
		`end\04`:       `end\04`,
		`bad\089`:      `bad\089`,
		`big\777`:      `big\777`,
		`\`:            `\`,
	} {
		if got := mountinfo.Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParse: any input parses without panic, every mount point comes
// from a line of at least five fields, and Under finds only what is at
// or below its directory.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`1 2 3 4 \`))
	f.Add([]byte("1 2 3 / /a\\0401\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := mountinfo.Parse(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		lines := 0
		for _, l := range strings.Split(string(b), "\n") {
			if len(strings.Fields(l)) >= 5 {
				lines++
			}
		}
		if len(ms) > lines {
			t.Fatalf("%d mounts from %d lines of five fields", len(ms), lines)
		}
		for _, p := range mountinfo.Under(ms, "/a") {
			if p != "/a" && !strings.HasPrefix(p, "/a/") {
				t.Fatalf("Under(/a) returned %q", p)
			}
		}
	})
}

package release

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// imageLine matches a manifest's "image:" of airlockd, whatever tag or
// digest it names today.
var imageLine = regexp.MustCompile(`(?m)^(\s*(?:-\s+)?image:\s*)\S*/airlockd(?::[^\s@]+)?(?:@sha256:[0-9a-f]{64})?\s*$`)

// PinManifests copies the YAML files of src (recursively) to dst with
// every airlockd image replaced by ref; it returns how many it replaced.
func PinManifests(src, dst, ref string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") {
			n += len(imageLine.FindAll(b, -1))
			b = imageLine.ReplaceAll(b, []byte("${1}"+ref))
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err == nil && n == 0 {
		err = fmt.Errorf("no airlockd image in the manifests under %s", src)
	}
	return n, err
}

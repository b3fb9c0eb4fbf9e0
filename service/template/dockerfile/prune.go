package dockerfile

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// Prune removes cached layers and results not used for olderThan (by
// any build: a cache hit counts as a use). It returns how many
// directories it removed. A result a template still runs from must have
// been copied out of the cache (see the package doc) or be kept by
// calling Prune with a longer olderThan.
func (b *Builder) Prune(ctx context.Context, olderThan time.Duration) (int, error) {
	cut := time.Now().Add(-olderThan)
	n := 0
	for _, kind := range []struct{ dir, meta string }{{b.layersDir(), "layer.json"}, {b.rootfsDir(), "rootfs.json"}} {
		ents, err := os.ReadDir(kind.dir)
		if err != nil {
			return n, err
		}
		for _, e := range ents {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			d := filepath.Join(kind.dir, e.Name())
			fi, err := os.Stat(filepath.Join(d, kind.meta))
			if err == nil && fi.ModTime().After(cut) {
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

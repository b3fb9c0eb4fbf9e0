package image

import (
	"io/fs"
	"path/filepath"
)

// DirSize returns the sum of the sizes of the regular files under root,
// counting a file with several hard links inside the tree once. Symbolic
// links are not followed.
func DirSize(root string) (int64, error) {
	var total int64
	seen := map[inode]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if ino, linked := fileInode(fi); linked {
			if seen[ino] {
				return nil
			}
			seen[ino] = true
		}
		total += fi.Size()
		return nil
	})
	return total, err
}

package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/guestabi"
)

// CollectConfig says what Collect must keep besides the current image of
// each name, and whether it removes anything.
type CollectConfig struct {
	// InUse are root filesystems (or image directories) that sandboxes
	// on the node use now: running sessions, paused ones being resumed,
	// pool members and base snapshots being made (the backends report
	// them). An image version holding one of them is kept.
	InUse []string
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
}

// Collected is what Collect removed (or, in a dry run, would remove).
type Collected struct {
	// Removed are the directories: image versions, guest artefacts and
	// debootstrap stages.
	Removed []string
	// FreedBytes is the size of the files only those directories held
	// (a file hard-linked from a kept directory frees nothing).
	FreedBytes int64
}

// Collect removes, for every name, the image versions other than the one
// Resolve returns (or the newest, when it returns none) and those in
// cfg.InUse, then the microVM guest artefacts and the stages neither a
// kept image was made from nor a shipped spec (Specs) names, nor a kept
// derived stage was copied from. Builds and Collect exclude each other
// (the images lock).
func (s *Store) Collect(ctx context.Context, cfg CollectConfig) (*Collected, error) {
	unlock, err := lockImages(ctx, s.imagesDir, io.Discard)
	if err != nil {
		return nil, err
	}
	defer unlock()
	doomed, err := s.doomed(ctx, realPaths(cfg.InUse))
	if err != nil {
		return nil, err
	}
	out := &Collected{}
	if out.FreedBytes, err = ExclusiveBytes(doomed); err != nil {
		return nil, err
	}
	if cfg.DryRun {
		out.Removed = doomed
		return out, nil
	}
	trash := filepath.Join(s.imagesDir, ".tmp")
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return nil, err
	}
	for _, dir := range doomed {
		// Rename first: the directory disappears from listings at once.
		tmp := filepath.Join(trash, fmt.Sprintf("prune-%s-%d", filepath.Base(dir), time.Now().UnixNano()))
		if err := os.Rename(dir, tmp); err != nil {
			return out, err
		}
		out.Removed = append(out.Removed, dir)
		if err := removeTree(tmp); err != nil {
			return out, err
		}
	}
	return out, nil
}

// doomed lists what Collect removes (the images lock held).
func (s *Store) doomed(ctx context.Context, used []string) ([]string, error) {
	all, err := s.scan()
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}   // dir
	stages := map[string]bool{} // stage hash in use
	// The stages of the shipped specs are kept even when no image of
	// them is: they are what the next build of that image starts from
	// (a node that has not built python-ds yet, or whose agent changed),
	// and making one again is a debootstrap of minutes.
	for _, spec := range Specs() {
		stages[StageHash(spec)] = true
	}
	hashes := map[string]bool{} // image hashes kept
	byName := map[string][]built{}
	for _, b := range all {
		byName[b.m.Name] = append(byName[b.m.Name], b)
		if inUse(b.dir, used) {
			keep[b.dir] = true
		}
	}
	for name, bs := range byName {
		k := bs[0].dir // newest
		if img, err := s.Resolve(ctx, name); err == nil {
			k = filepath.Dir(img.Rootfs)
		}
		keep[k] = true
	}
	var doomed []string
	for _, b := range all {
		if keep[b.dir] {
			stages[b.m.StageHash] = true
			hashes[b.m.Hash] = true
			continue
		}
		doomed = append(doomed, b.dir)
	}
	// Guest artefacts of images no longer kept.
	gents, err := os.ReadDir(filepath.Join(s.imagesDir, "guests"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range gents {
		dir := filepath.Join(s.imagesDir, "guests", e.Name())
		var g guestabi.Guest
		if data, err := os.ReadFile(filepath.Join(dir, "guest.json")); err == nil && json.Unmarshal(data, &g) == nil && hashes[g.Image] {
			continue
		}
		if inUse(dir, used) {
			continue
		}
		doomed = append(doomed, dir)
	}
	ents, err := os.ReadDir(filepath.Join(s.imagesDir, "stages"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	keepParents(filepath.Join(s.imagesDir, "stages"), stages)
	for _, e := range ents {
		if e.IsDir() && !stages[e.Name()] {
			doomed = append(doomed, filepath.Join(s.imagesDir, "stages", e.Name()))
		}
	}
	return doomed, nil
}

// inUse reports whether the image directory dir holds one of paths.
func inUse(dir string, paths []string) bool {
	for _, p := range paths {
		if p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// realPaths resolves the symbolic links of paths (a path that does not
// resolve is kept as it is).
func realPaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		out = append(out, filepath.Clean(p))
	}
	return out
}

// ExclusiveBytes is the size of the regular files whose every hard link
// lies under dirs: what removing dirs frees on disk.
func ExclusiveBytes(dirs []string) (int64, error) {
	type file struct {
		size  int64
		links uint64
		seen  uint64
	}
	files := map[inode]*file{}
	var total int64
	for _, root := range dirs {
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
			k, links := fileLinks(fi)
			if links <= 1 {
				total += fi.Size()
				return nil
			}
			f := files[k]
			if f == nil {
				f = &file{size: fi.Size(), links: links}
				files[k] = f
			}
			f.seen++
			return nil
		})
		if err != nil {
			return total, err
		}
	}
	for _, f := range files {
		if f.seen >= f.links {
			total += f.size
		}
	}
	return total, nil
}

// keepParents adds to keep the parent of every kept derived stage in
// stagesDir (its stage.json names it), and their parents in turn: a
// derived stage is rebuilt from its parent, so the parent stays while
// the child or a shipped spec needs it.
func keepParents(stagesDir string, keep map[string]bool) {
	todo := make([]string, 0, len(keep))
	for h := range keep {
		todo = append(todo, h)
	}
	for len(todo) > 0 {
		h := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		info, err := readStageInfo(filepath.Join(stagesDir, h))
		if err != nil || info.Parent == "" || keep[info.Parent] {
			continue
		}
		keep[info.Parent] = true
		todo = append(todo, info.Parent)
	}
}

//go:build !linux

package image

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
)

var errNotLinux = errors.New("image building needs Linux")

func lockImages(ctx context.Context, imagesDir string, w io.Writer) (func(), error) {
	return nil, errNotLinux
}

func removeTree(dir string) error { return os.RemoveAll(dir) }

func mountsUnder(dir string) ([]string, error) { return nil, nil }

type inode struct{ dev, ino uint64 }

func fileInode(fi fs.FileInfo) (inode, bool) { return inode{}, false }

func fileLinks(fi fs.FileInfo) (inode, uint64) { return inode{}, 1 }

func syncAll() {}

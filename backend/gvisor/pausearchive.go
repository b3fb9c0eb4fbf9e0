package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/airlockhq/airlock"
)

var _ airlock.PauseArchiver = (*Backend)(nil)

// A paused sandbox as one stream (memory snapshots): a magic line, the
// checkpoint's files ('F', name, size, bytes), the disk image ('D', its
// size, then the 64 KiB blocks that are not all zero as offset, length and
// bytes, ended by a zero length), and 'E'. The disk images are allocated
// in full but mostly zeros; skipping zero blocks keeps the stream to what
// the sandbox wrote.
const (
	pauseMagic      = "ALKPAUSE1\n"
	pauseBlock      = 64 << 10
	maxPausedFiles  = 256
	maxPausedFileSz = 64 << 30
)

var pausedName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// WritePaused writes the paused sandbox in dir to w.
func (b *Backend) WritePaused(ctx context.Context, dir string, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.WriteString(pauseMagic)
	ck := filepath.Join(dir, pausedCheckpoint)
	entries, err := os.ReadDir(ck)
	if err != nil {
		return err
	}
	names := []string{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !pausedName.MatchString(e.Name()) {
			return fmt.Errorf("gvisor: checkpoint entry %q cannot be archived", e.Name())
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var hdr [8]byte
	for _, n := range names {
		f, err := os.Open(filepath.Join(ck, n))
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		bw.WriteByte('F')
		binary.BigEndian.PutUint16(hdr[:2], uint16(len(n)))
		bw.Write(hdr[:2])
		bw.WriteString(n)
		binary.BigEndian.PutUint64(hdr[:], uint64(fi.Size()))
		bw.Write(hdr[:])
		_, err = io.CopyN(bw, f, fi.Size())
		f.Close()
		if err != nil {
			return err
		}
	}
	disk, err := os.Open(filepath.Join(dir, pausedDisk))
	if err != nil {
		return err
	}
	defer disk.Close()
	fi, err := disk.Stat()
	if err != nil {
		return err
	}
	bw.WriteByte('D')
	binary.BigEndian.PutUint64(hdr[:], uint64(fi.Size()))
	bw.Write(hdr[:])
	buf := make([]byte, pauseBlock)
	zero := make([]byte, pauseBlock)
	for off := int64(0); off < fi.Size(); off += pauseBlock {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.ReadFull(disk, buf)
		if err != nil && err != io.ErrUnexpectedEOF {
			return err
		}
		if n == 0 || bytes.Equal(buf[:n], zero[:n]) {
			continue
		}
		binary.BigEndian.PutUint64(hdr[:], uint64(off))
		bw.Write(hdr[:])
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(n))
		bw.Write(l[:])
		bw.Write(buf[:n])
	}
	bw.Write(make([]byte, 12)) // the end of the extents: length 0
	bw.WriteByte('E')
	return bw.Flush()
}

// ReadPaused makes the paused sandbox dir from a stream WritePaused wrote.
func (b *Backend) ReadPaused(ctx context.Context, r io.Reader, dir string) (err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	bad := func(why string) error { return fmt.Errorf("gvisor: not a paused sandbox: %s", why) }
	br := bufio.NewReaderSize(r, 256<<10)
	magic := make([]byte, len(pauseMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != pauseMagic {
		return bad("no header")
	}
	ck := filepath.Join(dir, pausedCheckpoint)
	if err := os.Mkdir(ck, 0o700); err != nil {
		return err
	}
	var hdr [8]byte
	files, haveDisk := 0, false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		kind, err := br.ReadByte()
		if err != nil {
			return bad("cut short")
		}
		switch kind {
		case 'E':
			if !haveDisk {
				return bad("no disk")
			}
			if _, err := br.ReadByte(); err != io.EOF {
				return bad("data after the end")
			}
			return nil
		case 'F':
			if files++; files > maxPausedFiles || haveDisk {
				return bad("too many files, or a file after the disk")
			}
			if _, err := io.ReadFull(br, hdr[:2]); err != nil {
				return bad("cut short")
			}
			name := make([]byte, binary.BigEndian.Uint16(hdr[:2]))
			if _, err := io.ReadFull(br, name); err != nil || !pausedName.MatchString(string(name)) {
				return bad("bad file name")
			}
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				return bad("cut short")
			}
			size := binary.BigEndian.Uint64(hdr[:])
			if size > maxPausedFileSz {
				return bad("file too large")
			}
			f, err := os.OpenFile(filepath.Join(ck, string(name)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return bad("file twice")
			}
			n, err := io.CopyN(f, br, int64(size))
			cerr := f.Close()
			if err != nil || n != int64(size) || cerr != nil {
				return errors.Join(bad("file cut short"), err, cerr)
			}
		case 'D':
			if haveDisk {
				return bad("two disks")
			}
			haveDisk = true
			if err := readDisk(br, filepath.Join(dir, pausedDisk)); err != nil {
				return err
			}
		default:
			return bad("unknown record")
		}
	}
}

func readDisk(br *bufio.Reader, path string) error {
	bad := func(why string) error { return fmt.Errorf("gvisor: not a paused sandbox: disk %s", why) }
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:8]); err != nil {
		return bad("cut short")
	}
	size := int64(binary.BigEndian.Uint64(hdr[:8]))
	if size <= 0 || size > maxPausedFileSz {
		return bad("of a bad size")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	buf := make([]byte, pauseBlock)
	last := int64(-1)
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return bad("cut short")
		}
		off := int64(binary.BigEndian.Uint64(hdr[:8]))
		n := int64(binary.BigEndian.Uint32(hdr[8:]))
		if n == 0 {
			return f.Close()
		}
		if n > pauseBlock || off < 0 || off%pauseBlock != 0 || off <= last || off+n > size {
			return bad("extent out of place")
		}
		last = off
		if _, err := io.ReadFull(br, buf[:n]); err != nil {
			return bad("cut short")
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
	}
}

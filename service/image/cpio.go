package image

import (
	"fmt"
	"io"
	"strings"
)

// cpioWriter writes a cpio archive in the "newc" format, the one the
// Linux kernel unpacks as an initramfs. Our initramfs holds a handful of
// files we choose ourselves, so a writer of a few dozen lines does the
// job; no cpio archive is ever read back here, so there is no parser of
// untrusted input to harden (the reason not to take a library for it).
type cpioWriter struct {
	w     io.Writer
	off   int64
	inode uint32
	err   error
}

// cpio mode bits.
const (
	cpioDir  = 0o040000
	cpioReg  = 0o100000
	cpioLink = 0o120000
	cpioChr  = 0o020000
)

func (c *cpioWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.off += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.off % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// entry writes one header, the name and the data. Names are relative
// ("init", "lib/modules/x.ko"), parents before children.
func (c *cpioWriter) entry(name string, mode uint32, rdevMajor, rdevMinor uint32, data []byte) {
	if strings.HasPrefix(name, "/") || strings.Contains(name, "\x00") {
		c.err = fmt.Errorf("cpio: bad name %q", name)
		return
	}
	c.inode++
	nlink := 1
	if mode&0o170000 == cpioDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.inode, mode, 0, 0, nlink, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write([]byte(name + "\x00"))
	c.pad()
	c.write(data)
	c.pad()
}

func (c *cpioWriter) Dir(name string, perm uint32) { c.entry(name, cpioDir|perm, 0, 0, nil) }
func (c *cpioWriter) File(name string, perm uint32, data []byte) {
	c.entry(name, cpioReg|perm, 0, 0, data)
}
func (c *cpioWriter) Symlink(name, target string) {
	c.entry(name, cpioLink|0o777, 0, 0, []byte(target))
}
func (c *cpioWriter) CharDev(name string, perm, major, minor uint32) {
	c.entry(name, cpioChr|perm, major, minor, nil)
}

// Close writes the trailer and reports the first error.
func (c *cpioWriter) Close() error {
	c.inode = 0
	c.entry("TRAILER!!!", 0, 0, 0, nil)
	return c.err
}

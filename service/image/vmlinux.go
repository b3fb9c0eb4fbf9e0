package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/klauspost/compress/zstd"
)

// A distribution's kernel is a bzImage: a small decompressor and the
// kernel, compressed (Debian's with xz). Every cold boot decompresses it
// again, and under QEMU's TCG that takes seconds (a cold boot to the
// agent's hello went from a median of 6.09 s to 3.13 s without it on the
// 2-core development machines; BENCHMARKS.md). QEMU can boot
// the kernel's own ELF image directly through the PVH entry point, which
// Debian's kernels have (CONFIG_PVH): the guest build decompresses the
// kernel once, keeps the ELF beside the bzImage's place, and the VM boots
// that. A kernel without the PVH entry, or a payload this code cannot
// unpack, keeps the bzImage.

// kernelELFVersion is part of a guest's hash: guests built before the
// ELF kernel are built again (and their snapshots with them).
const kernelELFVersion = 1

// maxKernelELF bounds the decompressed kernel (Debian's is 66 MB).
const maxKernelELF = 512 << 20

// xenElfnotePhys32Entry is the ELF note (owner "Xen") that holds the
// kernel's 32-bit PVH entry point, which QEMU looks for to boot an ELF
// kernel.
const xenElfnotePhys32Entry = 18

// extractKernelELF writes the uncompressed kernel of the bzImage at
// bzImage to dst (mode 0444), or says why it cannot: the file is not a
// bzImage of boot protocol 2.08 or later (which says where its payload
// is), the payload is not xz, gzip or zstd (xz needs Debian's xz-utils:
// the kernel's xz stream uses the x86 BCJ filter, which no Go xz decoder
// implements), or the result is not an x86-64 ELF with a PVH entry.
func extractKernelELF(ctx context.Context, bzImage, dst string) error {
	img, err := os.ReadFile(bzImage)
	if err != nil {
		return err
	}
	payload, err := bzImagePayload(img)
	if err != nil {
		return err
	}
	var kernel []byte
	switch {
	case bytes.HasPrefix(payload, []byte("\xfd7zXZ\x00")):
		kernel, err = unxz(ctx, payload)
	case bytes.HasPrefix(payload, []byte{0x1f, 0x8b}):
		kernel, err = gunzip(payload)
	case bytes.HasPrefix(payload, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		kernel, err = unzstd(payload)
	default:
		return fmt.Errorf("kernel payload compressed with an unknown method (magic % x)", payload[:min(len(payload), 6)])
	}
	if err != nil {
		return err
	}
	if err := checkPVH(kernel); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, kernel, 0o444); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// bzImagePayload returns the compressed kernel inside a bzImage: the
// header (at 0x1f1, magic "HdrS" at 0x202) gives the setup's size in
// 512-byte sectors, and from boot protocol 2.08 on the payload's offset
// (from the end of the setup) and length.
func bzImagePayload(img []byte) ([]byte, error) {
	if len(img) < 0x250 || string(img[0x202:0x206]) != "HdrS" {
		return nil, errors.New("not a bzImage (no HdrS header)")
	}
	if v := binary.LittleEndian.Uint16(img[0x206:]); v < 0x0208 {
		return nil, fmt.Errorf("bzImage boot protocol %d.%02d, want 2.08 or later", v>>8, v&0xff)
	}
	setupSects := int(img[0x1f1])
	if setupSects == 0 {
		setupSects = 4
	}
	off := uint64(setupSects+1)*512 + uint64(binary.LittleEndian.Uint32(img[0x248:]))
	n := uint64(binary.LittleEndian.Uint32(img[0x24c:]))
	if n == 0 || off+n > uint64(len(img)) {
		return nil, fmt.Errorf("bzImage payload at %d+%d is outside the file (%d bytes)", off, n, len(img))
	}
	return img[off : off+n], nil
}

// unxz decompresses one xz stream with xz(1), bounded as the other
// decompressors are.
func unxz(ctx context.Context, data []byte) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, "xz", "--decompress", "--stdout", "--single-stream")
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("xz --decompress: %w", err)
	}
	kernel, err := readAtMost(out)
	if err != nil {
		cancel() // too large: xz is killed rather than read to its end
	}
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("xz --decompress: %w: %s", werr, bytes.TrimSpace(stderr.Bytes()))
	}
	return kernel, err
}

func gunzip(data []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	r.Multistream(false)
	return readAtMost(r)
}

func unzstd(data []byte) ([]byte, error) {
	d, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return readAtMost(d)
}

func readAtMost(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxKernelELF+1))
	if err == nil && len(b) > maxKernelELF {
		err = fmt.Errorf("the decompressed kernel is over %d MiB", maxKernelELF>>20)
	}
	return b, err
}

// checkPVH checks that kernel is an x86-64 ELF executable with the Xen
// PVH entry note.
func checkPVH(kernel []byte) error {
	f, err := elf.NewFile(bytes.NewReader(kernel))
	if err != nil {
		return fmt.Errorf("the decompressed kernel: %w", err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC {
		return fmt.Errorf("the decompressed kernel is %v %v %v, want an x86-64 executable", f.Class, f.Machine, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(io.LimitReader(p.Open(), 1<<20))
		if err != nil {
			return err
		}
		if hasNote(notes, "Xen", xenElfnotePhys32Entry, f.ByteOrder) {
			return nil
		}
	}
	return errors.New("the kernel has no PVH entry (CONFIG_PVH)")
}

// hasNote reports whether the notes of a PT_NOTE segment hold one of
// owner and type.
func hasNote(b []byte, owner string, typ uint32, bo binary.ByteOrder) bool {
	align := func(n uint32) int { return int((n + 3) &^ 3) }
	for len(b) >= 12 {
		namesz, descsz, t := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
		b = b[12:]
		if namesz > uint32(len(b)) || align(namesz) > len(b) {
			return false
		}
		name := b[:namesz]
		b = b[align(namesz):]
		if descsz > uint32(len(b)) || align(descsz) > len(b) {
			return false
		}
		b = b[align(descsz):]
		if t == typ && string(bytes.TrimRight(name, "\x00")) == owner {
			return true
		}
	}
	return false
}

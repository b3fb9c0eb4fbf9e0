package guest

import (
	"github.com/airlockhq/airlock/internal/guestabi"

	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reseederArg makes guestabi.InitPath the reseeder (started by init, PID 1).
const reseederArg = "airlock-reseed"

// SeedBytes is how much entropy the host sends per reseed; the reseeder
// answers each with one byte once the kernel has reseeded.
const SeedBytes = 64

// The random driver's ioctls (linux/random.h): add entropy to the input
// pool, crediting it; reseed the kernel's generator from the pool now.
const (
	rndAddEntropy = 0x40085203 // _IOW('R', 0x03, int[2])
	rndReseedCRNG = 0x5207     // _IO('R', 0x07)
)

// startReseeder starts the reseeder on the port dev: a root process of
// its own that stays in the initramfs (below the sandbox's root, out of
// its sight: hidepid) and outlives nothing but the guest. The agent
// never holds CAP_SYS_ADMIN, which the kernel asks for to reseed now; a
// guest restored from a state many clones share would otherwise draw
// the same random numbers as its siblings until its next scheduled
// reseed.
func startReseeder(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(guestabi.InitPath, reseederArg)
	cmd.Args = []string{guestabi.InitPath, reseederArg}
	cmd.Env = []string{}
	cmd.Stderr = os.Stderr         // the console
	cmd.ExtraFiles = []*os.File{f} // fd 3
	return cmd.Start()
}

// runReseeder serves the reseed port (fd 3): SeedBytes from the host are
// added to the kernel's input pool, credited, the generator is reseeded
// from it, and one byte goes back. It never returns.
func runReseeder() {
	port := os.NewFile(3, "reseed")
	buf := make([]byte, SeedBytes)
	for {
		if err := readSeed(port, buf); err != nil {
			fmt.Fprintf(os.Stderr, "airlock reseeder: %v\n", err)
			time.Sleep(time.Second)
			continue
		}
		if err := reseed(buf); err != nil {
			fmt.Fprintf(os.Stderr, "airlock reseeder: %v\n", err)
			port.Write([]byte{0})
			continue
		}
		port.Write([]byte{1})
	}
}

// readSeed fills buf from the port. A port whose host is not connected
// reads as the end of the file: wait and read again.
func readSeed(port *os.File, buf []byte) error {
	n := 0
	for n < len(buf) {
		k, err := port.Read(buf[n:])
		if k == 0 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			return err
		}
		n += k
	}
	return nil
}

// reseed adds seed to the input pool (crediting all of its bits) and
// reseeds the kernel's generator from the pool.
func reseed(seed []byte) error {
	fd, err := unix.Open("/dev/urandom", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		// Past the switch of root the initramfs's /dev is gone: make a
		// node of our own.
		if err := unix.Mknod("/airlock/urandom", unix.S_IFCHR|0o600, int(unix.Mkdev(1, 9))); err != nil && err != unix.EEXIST {
			return err
		}
		if fd, err = unix.Open("/airlock/urandom", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
	}
	defer unix.Close(fd)
	info := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(info[0:], uint32(len(seed)*8))
	binary.NativeEndian.PutUint32(info[4:], uint32(len(seed)))
	copy(info[8:], seed)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), rndAddEntropy, uintptr(unsafe.Pointer(&info[0]))); errno != 0 {
		return fmt.Errorf("add entropy: %w", errno)
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), rndReseedCRNG, 0); errno != 0 {
		return fmt.Errorf("reseed: %w", errno)
	}
	return nil
}

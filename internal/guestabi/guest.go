package guestabi

import "time"

// RecipeVersion names how guest artefacts are made; bump it when a
// change here changes what a guest boots.
const RecipeVersion = "4"

// What the VMM gives the guest's devices, and the guest's init looks for
// (package backend/microvm/guest): the serial numbers of the root and scratch disks
// and the name of the agent's virtio-serial port.
const (
	RootSerial    = "airlock-root"
	ScratchSerial = "airlock-scratch"
	Port          = "airlock.agent"
	// ReseedPort is the port the host sends a restored guest fresh
	// entropy on (the guest's reseeder).
	ReseedPort = "airlock.reseed"
)

// Guest is what a microVM boots for an image: a kernel, an initramfs of
// our own (the modules and the agent as /init), and a read-only ext4
// disk of the image's rootfs. Files live under
// <state>/images/guests/<hash12>/ and are named by a hash of the image,
// the kernel and this recipe.
type Guest struct {
	Hash          string    `json:"hash"`
	Image         string    `json:"image"`      // the image's hash
	KernelRelease string    `json:"kernel"`     // e.g. 6.1.0-57-amd64
	Kernel        string    `json:"-"`          // host path of the kernel (bzImage)
	Initrd        string    `json:"-"`          // host path of the initramfs (newc cpio)
	RootDisk      string    `json:"-"`          // host path of the root disk (ext4)
	RootDiskBytes int64     `json:"disk_bytes"` // its size
	BuiltAt       time.Time `json:"built_at"`
}

// Package guestabi is the contract between the three sides of a microVM
// guest: the image store that builds its artefacts (service/image), the
// backend that boots them (backend/microvm) and the init inside the
// guest (backend/microvm/guest). It holds the guest's Config and where
// the initramfs keeps it, the artefacts of a built guest (Guest), and the
// names the host gives the guest's devices. It imports nothing of
// Airlock, so each side can import it.
package guestabi

// Package image turns a declarative airlock.ImageSpec into a read-only
// root filesystem with the agent baked in, and finds built images again.
//
// It owns:
//
//   - the shipped specs (Specs, SpecByName);
//   - content hashing of a spec plus the agent binary (Hash, StageHash);
//   - building: debootstrap from Debian packages, trimming, the sandbox
//     user, the spec's files, the agent install, a manifest (Builder);
//   - derived stages: a spec that names a parent (ImageSpec.From, one of
//     the shipped specs: parent.go) starts from a copy of the parent's
//     stage and installs only its extra packages with apt-get in a
//     chroot (derive.go);
//   - refusing to publish an image that holds a credential: the spec's
//     environment and files are scanned before the build, the rootfs
//     before it is renamed into place (secrets.go, with
//     internal/secretscan);
//   - the on-disk layout under <state>/images and resolving a name to the
//     newest matching build (Store, an airlock.ImageResolver);
//   - the microVM guest artefacts of an image (BuildGuest): the kernel
//     from an unpacked Debian kernel package (FindKernel), our initramfs
//     (cpio.go, kmod.go) and a read-only ext4 root disk.
//
// On-disk layout, all under <state>/images:
//
//	stages/<stagehash>/rootfs       debootstrap output (or, for a derived spec, a
//	                                copy of the parent's stage plus apt-get)
//	                                plus trimming; keyed by the spec (and the
//	                                parent's stage hash), shared by every agent build
//	stages/<stagehash>/stage.json   what made it; "parent" names the stage a derived
//	                                one was copied from (kept while it is kept)
//	<name>-<hash12>/rootfs          final image: hard-link copy of the stage
//	<name>-<hash12>/manifest.json   plus /opt/airlock/bin/airlock-agent
//	guests/<hash12>/                a microVM guest of one image and kernel:
//	                                vmlinux (the kernel decompressed once, booted
//	                                through its PVH entry; vmlinuz, the bzImage,
//	                                where that fails), initrd.cpio, root.ext4,
//	                                guest.json
//	.tmp/                           builds in progress; removed at the next build
//	.lock                           flock held while building
//
// A directory is only ever renamed into place complete, so anything outside
// .tmp is a finished build. Final rootfs files are hard links into the
// stage: nothing may write into a built rootfs in place (sandboxes mount it
// read-only; the builder replaces files, never writes through a link).
//
// It must not touch running sandboxes, snapshots or anything a backend
// mounted: it never removes an image a sandbox may be using except through
// Prune, which the operator calls.
package image

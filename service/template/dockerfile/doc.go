// Package dockerfile builds a template's root filesystem from a
// Dockerfile, without a Docker daemon and without a privileged build on
// the host: every RUN runs in a gVisor sandbox of ours (an
// airlock.BuildRunner, the gvisor backend) with no network, or, when the
// build asks for one, in a network of its own that the node's egress
// makes under the build's allow list (network.go).
//
// It owns:
//
//   - parsing (Parse, with BuildKit's Dockerfile parser) of the
//     supported subset: one FROM, RUN (shell and exec form), COPY and
//     ADD of the build context, ENV, ARG, WORKDIR, USER. Everything else
//     is refused with a *LineError naming the instruction and its line,
//     never ignored; so are multi-stage builds, RUN flags, heredocs,
//     COPY --from, and ADD of URLs or archives;
//   - expanding variables (Expand) as Docker does;
//   - running the steps (Builder.Build): each RUN, COPY, ADD and WORKDIR
//     runs on an overlay of the base image and the layers before it; its
//     upper directory becomes the step's layer;
//   - the step cache: a layer is kept under its key, the digest of its
//     parent's key and the step's inputs (the instruction expanded, its
//     environment, user and working directory, and for COPY and ADD the
//     digest of the copied files; for RUN, the build's allow list), so a
//     rebuild of an unchanged Dockerfile runs nothing and a changed line
//     rebuilds from there on;
//   - flattening the layers into one tree (hard links into the base image
//     and the layers) with our agent put back, and Prune;
//   - claiming the cache entries a build uses while it runs (a
//     template.Pin under tmp/pins, which the template garbage collector
//     reads) and reporting them (Result.Uses), so that the collector
//     keeps what a template or a build in progress uses.
//
// On-disk layout, all under Config.Dir (<state>/templates/dockerfile):
//
//	layers/<key32>/diff        the overlay upper directory of one step
//	layers/<key32>/layer.json  its key, parent, line and text; its
//	                           modification time is the layer's last use
//	rootfs/<key32>/rootfs      a flattened result
//	rootfs/<key32>/rootfs.json its key; modification time as above
//	tmp/                       steps in progress and the pins of builds
//	                           in progress; New unmounts and removes it
//
// Layers and results are renamed into place complete and never written
// again. The build context is read only through an os.Root and the
// rootfs written only through one, so neither a symlink in the context
// nor one a RUN step left in the image leads outside.
//
// It must not touch the template records, their store or the REST
// routes (package template does), nor sandboxes other than its own
// build steps.
package dockerfile

// Package release builds what scripts/release.sh ships besides the
// tarball's plain files: the OCI image of airlockd, written as an OCI
// image archive (an OCI layout in a tar, loadable by podman and skopeo)
// without a Docker daemon, and the Kubernetes manifests with that image's
// digest pinned. It reads the files it is given and writes only its
// outputs; it runs nothing.
package release

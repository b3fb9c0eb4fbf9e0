#!/usr/bin/env bash
# Builds a release for linux/amd64 into dist/:
#
#   dist/airlock-<version>-linux-amd64.tar.gz   airlockd, airlock, the agent,
#       our runsc, the systemd units, install.sh, the docs and the
#       Kubernetes manifests; unpacks into airlock-<version>-linux-amd64/
#   dist/airlockd-<version>.oci.tar             airlockd's OCI image archive
#       (podman load -i, or skopeo copy oci-archive:...), built without a
#       Docker daemon (internal/release, go-containerregistry)
#   dist/kubernetes/                            deploy/kubernetes with the
#       image pinned by digest: <repo>:<version>@sha256:...
#
#   scripts/release.sh [--version V] [--repo REPO] [--dist DIR]
#
# DIR (default dist/, or AIRLOCK_DIST) is where the outputs go.
# The version defaults to `git describe` (0.0.0-dev.<commit> without a
# tag); REPO (default registry.example.com/airlockhq/airlockd, or
# AIRLOCK_IMAGE_REPO) is where the operator pushes the image:
#   skopeo copy --preserve-digests oci-archive:dist/airlockd-V.oci.tar docker://REPO:V
# runsc comes from scripts/setup.sh (AIRLOCK_PREFIX/bin/runsc). The
# image's base layer is a debootstrap of Debian (minbase plus what
# airlockd and `airlock image build` run), cached under
# AIRLOCK_RELEASE_CACHE (default /var/cache/airlock-release). Must run as
# root (debootstrap).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
VERSION="${AIRLOCK_VERSION:-}"
IMAGE_REPO="${AIRLOCK_IMAGE_REPO:-registry.example.com/airlockhq/airlockd}"
DIST="${AIRLOCK_DIST:-$REPO/dist}"
while [ $# -gt 0 ]; do
	case "$1" in
	--version) VERSION="$2"; shift 2 ;;
	--repo) IMAGE_REPO="$2"; shift 2 ;;
	--dist) DIST="$2"; shift 2 ;;
	*) echo "release: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ -z "$VERSION" ]; then
	VERSION="$(git describe --tags --dirty 2>/dev/null | sed 's/^v//')" ||
		true
	[ -n "$VERSION" ] || VERSION="0.0.0-dev.$(git rev-parse --short=12 HEAD)"
fi
if ! printf '%s' "$VERSION" | grep -Eq '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'; then
	echo "release: version $VERSION is not a valid image tag" >&2
	exit 2
fi
PREFIX="${AIRLOCK_PREFIX:-/usr/local}"
CACHE="${AIRLOCK_RELEASE_CACHE:-/var/cache/airlock-release}"
NAME="airlock-${VERSION}-linux-amd64"
mkdir -p "$DIST"
DIST="$(cd "$DIST" && pwd)"
STAGE="$DIST/$NAME"
t0=$SECONDS
step() { printf '\n==> %s (%d s)\n' "$*" "$((SECONDS - t0))"; }

runsc="$PREFIX/bin/runsc"
if [ ! -x "$runsc" ] || ! grep -q seccomp-precompiled "$PREFIX/lib/airlock/runsc.version" 2>/dev/null; then
	echo "release: no runsc built by scripts/setup.sh at $runsc (with precompiled seccomp filters); run scripts/setup.sh first" >&2
	exit 1
fi

step "binaries of $VERSION"
rm -rf "$STAGE" "$DIST/kubernetes"
mkdir -p "$STAGE/bin" "$STAGE/doc" "$STAGE/systemd"
X="-X github.com/airlockhq/airlock/internal/version.Version=$VERSION"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $X" -o "$STAGE/bin/" ./cmd/airlock
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.build=$VERSION" -o "$STAGE/bin/" ./cmd/airlock-agent
CGO_ENABLED=1 go build -trimpath -ldflags "-s -w $X" -o "$STAGE/bin/" ./cmd/airlockd
cp "$runsc" "$STAGE/bin/runsc"
"$STAGE/bin/airlockd" --version

step "docs, units, install.sh"
cp README.md BENCHMARKS.md "$STAGE/doc/"
[ -d docs ] && cp -R docs "$STAGE/doc/"
cp deploy/systemd/*.service deploy/systemd/*.example "$STAGE/systemd/"
[ -d deploy/systemd/postgresql@.service.d ] && cp -R deploy/systemd/postgresql@.service.d "$STAGE/systemd/"
cp scripts/install.sh "$STAGE/install.sh"
chmod 0755 "$STAGE/install.sh"

step "base root file system of the image (debootstrap, cached in $CACHE)"
# What airlockd runs (runsc is ours; mkfs.ext4 for workspace disks) and
# what `airlock image build` runs in the init container (debootstrap,
# with the keyring, wget and CA certificates).
SUITE=bookworm
INCLUDE="debootstrap,debian-archive-keyring,ca-certificates,wget,gpgv,e2fsprogs"
key="$(printf '%s %s %s\n' "$SUITE" "$INCLUDE" 1 | sha256sum | cut -c1-16)"
base="$CACHE/base-$key"
if [ -f "$base/.complete" ]; then
	echo "present: $base"
else
	command -v debootstrap >/dev/null || { echo "release: debootstrap is needed (apt-get install debootstrap)" >&2; exit 1; }
	mirror="$(go run ./internal/tools/release mirror -suite "$SUITE")"
	rm -rf "$base.tmp"
	mkdir -p "$base.tmp"
	debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$base.tmp/rootfs" "$mirror"
	# Nothing that changes from build to build, and no package lists.
	rm -rf "$base.tmp/rootfs/var/cache/apt/"*.bin "$base.tmp/rootfs/var/lib/apt/lists/"* \
		"$base.tmp/rootfs/var/log/"* "$base.tmp/rootfs/var/cache/debconf/"*-old
	touch "$base.tmp/.complete"
	rm -rf "$base"
	mv "$base.tmp" "$base"
fi

step "OCI image $DIST/airlockd-$VERSION.oci.tar"
bins=()
for b in airlockd airlock airlock-agent runsc; do bins+=(-bin "$STAGE/bin/$b"); done
ref="$(go run ./internal/tools/release image -base "$base/rootfs" -version "$VERSION" -repo "$IMAGE_REPO" \
	-out "$DIST/airlockd-$VERSION.oci.tar" "${bins[@]}" -doc README.md)"
echo "$ref"

step "Kubernetes manifests with the image pinned"
go run ./internal/tools/release pin -src deploy/kubernetes -dst "$DIST/kubernetes" -ref "$ref"
cp -R "$DIST/kubernetes" "$STAGE/kubernetes"
echo "$ref" >"$STAGE/IMAGE"
echo "$VERSION" >"$STAGE/VERSION"

step "tarball $DIST/$NAME.tar.gz"
tar -C "$DIST" --owner=0 --group=0 -czf "$DIST/$NAME.tar.gz.tmp" "$NAME"
mv "$DIST/$NAME.tar.gz.tmp" "$DIST/$NAME.tar.gz"
rm -rf "$STAGE"
ls -l "$DIST/$NAME.tar.gz" "$DIST/airlockd-$VERSION.oci.tar"
step "release $VERSION done"

#!/usr/bin/env bash
# Installs what Airlock needs on a Debian machine and builds it: Debian
# packages, runsc (gVisor), the microVM guest kernel, the three binaries
# and the two images. Safe to run again: every step checks first and
# skips what is already there.
# Must run as root (runsc, cgroups, mounts and debootstrap need it).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_DIR="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
# The gVisor release we pin: a pseudo-version of gvisor.dev/gvisor (its
# "go" branch), built static because a dynamically linked runsc fails
# inside its own chroot.
RUNSC_VERSION="v0.0.0-20260905035102-160fafc42237"
RUNSC_STAMP=/usr/local/lib/airlock/runsc.version
# SeaweedFS, the S3-compatible server the object-storage tests run
# against (s3blobs, e2e): a pseudo-version of github.com/seaweedfs/seaweedfs,
# built from its module (its go.mod has a replace directive, so go install
# MOD@VERSION refuses it). Tests only; airlockd does not need it.
WEED_VERSION="v0.0.0-20261109003541-7506e5f91cd6"
WEED_BIN=/usr/local/lib/airlock/bin/weed
WEED_STAMP=/usr/local/lib/airlock/weed.version

step() { printf '\n==> %s\n' "$*"; }
t0=$SECONDS

if [ "$(id -u)" != 0 ]; then
	echo "setup: must run as root (runsc, cgroups, mounts and debootstrap need it); try: sudo $0" >&2
	exit 1
fi
if ! command -v go >/dev/null; then
	echo "setup: Go is required (1.26 or newer) and was not found on PATH" >&2
	exit 1
fi

step "Debian packages"
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v ip >/dev/null || need+=(iproute2)
command -v mount >/dev/null || need+=(mount)
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
[ -e /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
# airlockd is built with cgo (the guard's Python grammar is C), and so is
# every test binary (the race detector needs cgo): a C compiler and the C
# library's headers. For the tests: the agent's tests run the host's
# interpreters and setsid.
command -v python3 >/dev/null || need+=(python3)
command -v node >/dev/null || need+=(nodejs)
command -v setsid >/dev/null || need+=(util-linux)
command -v gcc >/dev/null || need+=(gcc)
[ -e /usr/include/stdlib.h ] || need+=(libc6-dev)
# The web console's browser test drives Debian's headless Chromium.
[ -x /usr/bin/chromium ] || need+=(chromium)
# The microVM backend (airlockd --microvm): QEMU's microvm machine. Its
# guest kernel comes from Debian's linux-image-amd64, unpacked below into
# the state directory (not installed on the host).
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v dpkg-deb >/dev/null || need+=(dpkg)
if [ ${#need[@]} -gt 0 ]; then
	echo "installing: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${need[@]}"
else
	echo "all present"
fi

step "Node for the E2B SDK test (e2e/e2bsdk: Node >=20.18.1 <21 or >=22, and npm; tests only)"
# The pinned E2B SDKs need a newer Node than Debian 12's nodejs (18). The
# test installs them with npm ci from e2e/e2bsdk/package-lock.json.
node_ok() {
	local v
	v="$(node --version 2>/dev/null)" || return 1
	v="${v#v}"
	local major="${v%%.*}" rest="${v#*.}"
	local minor="${rest%%.*}" patch="${rest#*.}"
	patch="${patch%%[!0-9]*}"
	[ "$major" -ge 22 ] && return 0
	[ "$major" -eq 20 ] || return 1
	[ "$minor" -gt 18 ] || { [ "$minor" -eq 18 ] && [ "$patch" -ge 1 ]; }
}
if node_ok && command -v npm >/dev/null; then
	echo "present: node $(node --version), npm $(npm --version)"
else
	echo "setup: the E2B SDK test (e2e/e2bsdk_test.go) needs Node >=20.18.1 <21 or >=22 with npm;" >&2
	echo "setup: found node $(node --version 2>/dev/null || echo none), npm $(npm --version 2>/dev/null || echo none)." >&2
	echo "setup: Debian 12's nodejs package is 18 and too old: install a Node 20.18.1+ or 22+ package that brings npm." >&2
	# Only the tests need it (scripts/test.sh sets AIRLOCK_SETUP_TESTS=1);
	# the service runs without Node.
	if [ "${AIRLOCK_SETUP_TESTS:-}" = 1 ]; then exit 1; fi
	echo "setup: going on: airlockd does not need Node" >&2
fi

step "PostgreSQL server (the PostgreSQL store: its tests, and a fleet's shared records)"
# The tests start throwaway servers of their own (internal/testpg: initdb
# in a temporary directory, a unix socket there, as the postgres user);
# they never use the cluster Debian's package creates and starts.
pg_initdb() {
	ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1
}
if [ -n "$(pg_initdb)" ] && [ -x "$(dirname "$(pg_initdb)")/postgres" ]; then
	echo "present: $(dirname "$(pg_initdb)")"
else
	echo "installing: postgresql"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends postgresql
	if [ -z "$(pg_initdb)" ]; then
		echo "setup: installed postgresql but found no /usr/lib/postgresql/*/bin/initdb" >&2
		exit 1
	fi
	echo "installed: $(dirname "$(pg_initdb)")"
fi
id postgres >/dev/null 2>&1 || { echo "setup: the postgresql package made no postgres user" >&2; exit 1; }

step "runsc (gVisor) ${RUNSC_VERSION}, with precompiled seccomp filters"
# gVisor's own build precompiles the seccomp-bpf programs runsc installs
# in every sandbox and gofer; `go install` of its Go branch leaves that
# out, and runsc then compiles them at every sandbox start (about a sixth
# of a start's CPU, see BENCHMARKS.md). We build from a copy of the
# module with the programs generated into it (scripts/runsc-seccomp).
RUNSC_BUILD="${RUNSC_VERSION} seccomp-precompiled-1"
if command -v runsc >/dev/null && [ -f "$RUNSC_STAMP" ] && [ "$(cat "$RUNSC_STAMP")" = "$RUNSC_BUILD" ]; then
	echo "present: $(command -v runsc)"
else
	build_runsc() {
		local mod src
		mod="$(go mod download -json "gvisor.dev/gvisor@${RUNSC_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		[ -d "$mod" ] || return 1
		src="$(mktemp -d /tmp/airlock-runsc-XXXXXX)"
		local ok=0
		cp -r "$mod/." "$src" && chmod -R u+w "$src" &&
			cp "$REPO/scripts/runsc-seccomp/gen.go" "$src/airlock_seccomp_gen.go" &&
			echo "generating the seccomp programs (a few minutes, once per machine)..." &&
			(cd "$src" && CGO_ENABLED=0 go run airlock_seccomp_gen.go) &&
			echo "building runsc..." &&
			(cd "$src" && CGO_ENABLED=0 go build -o /usr/local/bin/runsc.new ./runsc) &&
			mv /usr/local/bin/runsc.new /usr/local/bin/runsc && ok=1
		rm -rf "$src" /usr/local/bin/runsc.new
		[ "$ok" = 1 ]
	}
	if build_runsc; then
		mkdir -p "$(dirname "$RUNSC_STAMP")"
		echo "$RUNSC_BUILD" >"$RUNSC_STAMP"
		echo "installed /usr/local/bin/runsc"
	elif CGO_ENABLED=0 GOBIN=/usr/local/bin go install "gvisor.dev/gvisor/runsc@${RUNSC_VERSION}"; then
		echo "WARNING: the precompiled build failed; installed runsc without precompiled filters (slower starts)" >&2
		mkdir -p "$(dirname "$RUNSC_STAMP")"
		echo "$RUNSC_VERSION" >"$RUNSC_STAMP"
	else
		echo "WARNING: building runsc failed; falling back to Debian's runsc package," >&2
		echo "WARNING: which is older and may lack the systrap platform." >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		apt-get install -y -q runsc
		mkdir -p "$(dirname "$RUNSC_STAMP")"
		echo "debian-package" >"$RUNSC_STAMP"
	fi
fi

if [ "${AIRLOCK_SETUP_TESTS:-}" = 1 ]; then
	step "SeaweedFS ${WEED_VERSION} (the S3 server of the object-storage tests)"
	if [ -x "$WEED_BIN" ] && [ -f "$WEED_STAMP" ] && [ "$(cat "$WEED_STAMP")" = "$WEED_VERSION" ]; then
		echo "present: $WEED_BIN"
	else
		echo "building weed from the module (a large program: several minutes, up to 20 on two busy cores)..."
		weed_dir="$(cd / && go mod download -json "github.com/seaweedfs/seaweedfs@${WEED_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		if [ -z "$weed_dir" ] || [ ! -f "$weed_dir/go.mod" ]; then
			echo "setup: could not download github.com/seaweedfs/seaweedfs@${WEED_VERSION}" >&2
			exit 1
		fi
		mkdir -p "$(dirname "$WEED_BIN")"
		# go build -v names each package it compiles: show a count now
		# and then, so a long build is seen to go on.
		rm -f "$WEED_BIN.tmp"
		if ! (cd "$weed_dir" && CGO_ENABLED=0 go build -mod=readonly -buildvcs=false -v -o "$WEED_BIN.tmp" ./weed 2>&1) |
			awk '/^go: downloading/ {next} {n++} n % 100 == 0 {printf "  ... %d packages\n", n; fflush()} /^(#|.*\.go:[0-9]+)/ {print}' ||
			[ ! -x "$WEED_BIN.tmp" ]; then
			echo "setup: building weed failed" >&2
			exit 1
		fi
		mv "$WEED_BIN.tmp" "$WEED_BIN"
		echo "$WEED_VERSION" >"$WEED_STAMP"
		echo "installed $WEED_BIN ($("$WEED_BIN" version 2>/dev/null | head -1))"
	fi
fi

step "guest kernel for the microVM backend (Debian's linux-image-amd64, unpacked into $STATE_DIR/kernel)"
# The kernel package linux-image-amd64 points at, downloaded with apt and
# unpacked (dpkg-deb -x) into a directory named after its version: the
# host's /boot and /lib/modules stay untouched, and the image builder
# takes the newest directory there (see image.FindKernel).
kpkg="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
if [ -z "$kpkg" ]; then
	apt-get update -q
	kpkg="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
fi
kver="$(apt-cache policy "$kpkg" | awk '/Candidate:/ {print $2}')"
kdir="$STATE_DIR/kernel/${kpkg#linux-image-}_${kver}"
if [ -f "$kdir/.complete" ]; then
	echo "present: $kdir"
else
	echo "downloading $kpkg $kver with apt-get download and unpacking it..."
	tmp="$(mktemp -d)"
	chown _apt "$tmp" 2>/dev/null || chmod 0777 "$tmp" # apt downloads as its own user
	(cd "$tmp" && apt-get download -q "$kpkg=$kver")
	rm -rf "$kdir.tmp"
	mkdir -p "$kdir.tmp"
	dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$kdir.tmp"
	rm -rf "$tmp"
	touch "$kdir.tmp/.complete"
	rm -rf "$kdir"
	mv "$kdir.tmp" "$kdir"
	echo "unpacked into $kdir"
fi

step "binaries (bin/airlockd, bin/airlock, bin/airlock-agent)"
cd "$REPO"
mkdir -p bin
# The agent and the CLI are static (the agent must be). airlockd links the
# guard's Python grammar (tree-sitter, C) and so is built with cgo.
CGO_ENABLED=0 go build -trimpath -o bin/ ./cmd/airlock ./cmd/airlock-agent
CGO_ENABLED=1 go build -trimpath -o bin/ ./cmd/airlockd
echo "built in $REPO/bin"

step "images (base, python-ds) in $STATE_DIR/images; the first build takes several minutes"
mkdir -p "$STATE_DIR"
chmod 0700 "$STATE_DIR"
# --guest: the microVM backend's kernel, initramfs and root disk of each image too
bin/airlock image build --state-dir "$STATE_DIR" --agent bin/airlock-agent --guest all
bin/airlock image ls --state-dir "$STATE_DIR"

step "setup done in $((SECONDS - t0)) s"

#!/usr/bin/env bash
# Installs what airlockd needs on a Debian machine and builds it: the
# Debian packages it uses, runsc (gVisor), the three binaries and the two
# images. Safe to run again: every step checks first and skips what is
# already there. Must run as root (runsc, cgroups, mounts and debootstrap
# need it).
#
#   scripts/setup.sh [--microvm] [--tests] [--images=NAMES]
#
#   --microvm  also the microVM tier: QEMU, the guest kernel (Debian's
#              linux-image-amd64, unpacked into the state directory) and
#              each image's guest artefacts (also AIRLOCK_MICROVM=1, the
#              variable airlockd --microvm reads)
#   --tests    also what only the tests use: a PostgreSQL server, Debian's
#              Chromium, podman and runc, python3, a Node with npm (checked), and versitygw,
#              the S3 server of the object-storage tests (also
#              AIRLOCK_SETUP_TESTS=1; scripts/test.sh passes both flags)
#   --images=NAMES  the images to build now, comma-separated (default
#              all: base,python-ds); scripts/run.sh builds base and
#              leaves python-ds to airlockd, which builds it in the
#              background while it serves (airlockd --build-images)
#
# AIRLOCK_STATE_DIR (default /var/lib/airlock) is where images and the
# guest kernel go; AIRLOCK_PREFIX (default /usr/local) is where runsc
# (PREFIX/bin) and the test-only tools (PREFIX/lib/airlock/bin) go.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_DIR="${AIRLOCK_STATE_DIR:-/var/lib/airlock}"
PREFIX="${AIRLOCK_PREFIX:-/usr/local}"
# The gVisor release we pin: a pseudo-version of gvisor.dev/gvisor (its
# "go" branch), built static because a dynamically linked runsc fails
# inside its own chroot.
RUNSC_VERSION="v0.0.0-20260905035102-160fafc42237"
RUNSC_BIN="$PREFIX/bin/runsc"
RUNSC_STAMP="$PREFIX/lib/airlock/runsc.version"
# versitygw, the S3 server the object-storage tests run against (blob/s3,
# e2e): "versitygw posix DIR" serves a directory over S3. Tests only;
# airlockd does not need it.
VERSITYGW_VERSION="v1.8.0"
VERSITYGW_BIN="$PREFIX/lib/airlock/bin/versitygw"
VERSITYGW_STAMP="$PREFIX/lib/airlock/versitygw.version"
# The oldest Go that builds Airlock (go.mod's go line).
GO_MIN="1.26"

usage() { sed -n '8,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
microvm=0
tests=0
images=all
# The same booleans as airlockd's: 1/true/yes/on (any case) or 0/false/no/off.
is_true() {
	case "$(printf %s "$2" | tr '[:upper:]' '[:lower:]')" in
	1 | t | true | y | yes | on) return 0 ;;
	"" | 0 | f | false | n | no | off) return 1 ;;
	*) echo "setup.sh: $1=$2: want true or false" >&2; exit 2 ;;
	esac
}
is_true AIRLOCK_MICROVM "${AIRLOCK_MICROVM:-}" && microvm=1
is_true AIRLOCK_SETUP_TESTS "${AIRLOCK_SETUP_TESTS:-}" && tests=1
for arg in "$@"; do
	case "$arg" in
	--microvm) microvm=1 ;;
	--tests) tests=1 ;;
	--images=*) images="${arg#--images=}"; images="${images//,/ }" ;;
	-h | --help) usage; exit 0 ;;
	*) echo "setup: unknown argument $arg" >&2; usage >&2; exit 2 ;;
	esac
done

step() { printf '\n==> %s\n' "$*"; }
t0=$SECONDS

if [ "$(id -u)" != 0 ]; then
	echo "setup: must run as root (runsc, cgroups, mounts and debootstrap need it); try: sudo $0 $*" >&2
	exit 1
fi

step "Go ${GO_MIN} or newer"
# Debian 12's golang-go is 1.19, too old. The Go distribution unpacked
# into /usr/local/go is the usual install; a Go from 1.21 on fetches the
# toolchain go.mod names by itself, through the Go module proxy.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
go_version() { (cd "$REPO" && go env GOVERSION 2>/dev/null) | sed -n 's/^go\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p'; }
gv="$(command -v go >/dev/null && go_version || true)"
if [ -z "$gv" ] || [ "$(printf '%s\n%s\n' "$GO_MIN" "$gv" | sort -V | head -n 1)" != "$GO_MIN" ]; then
	{
		echo "setup: Go ${GO_MIN} or newer is needed to build Airlock; found: $(go version 2>/dev/null || echo 'no go on PATH')."
		echo "setup: Debian 12's golang-go package is Go 1.19, too old. Install the Go ${GO_MIN} distribution for"
		echo "setup: linux-amd64 into /usr/local/go and put /usr/local/go/bin on PATH (see README.md, \"Go\")."
		echo "setup: A release tarball (scripts/release.sh) installs without Go."
	} >&2
	exit 1
fi
echo "present: $(go version)"

apt_updated=0
apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	if [ "$apt_updated" = 0 ]; then
		apt-get update -q
		apt_updated=1
	fi
	apt-get install -y -q --no-install-recommends "$@"
}

step "Debian packages airlockd uses, and the C compiler that builds it"
need=()
# The image builder: debootstrap from Debian's packages, checked with the
# archive's keyring, over HTTPS where the mirror is.
command -v debootstrap >/dev/null || need+=(debootstrap)
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
[ -e /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
# Workspace disks and guest root disks (mkfs.ext4), mounts.
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v mount >/dev/null || need+=(mount)
# airlockd is built with cgo (the guard's Python grammar is C), and so is
# every test binary (the race detector needs cgo): a C compiler and the C
# library's headers.
command -v gcc >/dev/null || need+=(gcc)
[ -e /usr/include/stdlib.h ] || need+=(libc6-dev)
if [ "$microvm" = 1 ]; then
	# The microVM backend: QEMU's microvm machine. Its guest kernel comes
	# from Debian's linux-image-amd64, unpacked below into the state
	# directory (not installed on the host).
	command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
	command -v dpkg-deb >/dev/null || need+=(dpkg)
	# The guest build decompresses the kernel once (xz, with the x86
	# filter Debian's kernel uses), so that no VM decompresses it at boot.
	command -v xz >/dev/null || need+=(xz-utils)
fi
if [ "$tests" = 1 ]; then
	# The agent's tests run the host's interpreters, setsid and ip.
	command -v python3 >/dev/null || need+=(python3)
	command -v setsid >/dev/null || need+=(util-linux)
	command -v ip >/dev/null || need+=(iproute2)
	# The web console's browser test drives Debian's headless Chromium.
	[ -x /usr/bin/chromium ] || need+=(chromium)
	# The release's image test runs the image in podman (internal/release),
	# with runc where cgroups are hybrid, which crun refuses.
	command -v podman >/dev/null || need+=(podman)
	command -v runc >/dev/null || need+=(runc)
	# The CLI shell test drives airlock shell in tmux.
	command -v tmux >/dev/null || need+=(tmux)
	# The template import tests push to and pull from a real registry on
	# loopback (the CNCF distribution server); they start their own.
	[ -x /usr/bin/docker-registry ] || need+=(docker-registry)
	# The PostgreSQL store's tests start throwaway servers (checked below).
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
fi
if [ ${#need[@]} -gt 0 ]; then
	echo "installing: ${need[*]}"
	apt_install "${need[@]}"
else
	echo "all present"
fi
# The registry's package starts a system-wide registry on :5000 where
# systemd runs; the tests need none of it.
if [ "$tests" = 1 ] && command -v systemctl >/dev/null && systemctl is-enabled docker-registry >/dev/null 2>&1; then
	systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi

step "bin/airlock-agent (static), before runsc's build starts"
# runsc's build below compiles the standard library with the agent's
# settings (static, -trimpath): built first, alone, the agent leaves those
# packages in the build cache for runsc, where two builds at once would
# each compile them.
cd "$REPO"
mkdir -p bin
# The images are keyed by the agent's hash: the agent is built without
# the VCS stamp, so a commit that leaves the agent's code alone (or an
# edit elsewhere in the tree) does not make a new agent and new images.
CGO_ENABLED=0 go build -trimpath -buildvcs=false -o bin/ ./cmd/airlock-agent
echo "built bin/airlock-agent ($((SECONDS - t0)) s since setup started)"

step "runsc (gVisor) ${RUNSC_VERSION}, with precompiled seccomp filters, into $RUNSC_BIN"
# gVisor's own build precompiles the seccomp-bpf programs runsc installs
# in every sandbox and gofer; `go install` of its Go branch leaves that
# out, and runsc then compiles them at every sandbox start (13% of the
# CPU samples of a restore cycle's runsc, see BENCHMARKS.md). We build from a copy of the
# module with the programs generated into it (scripts/runsc-seccomp).
# Only ./runsc is built, with -trimpath (the generator and the build
# share the compiled packages) and without symbols and DWARF (-s -w: a
# third smaller, and the link is faster).
RUNSC_BUILD="${RUNSC_VERSION} seccomp-precompiled-2"
RUNSC_FLAGS=(-trimpath -buildvcs=false)
# runsc builds in the background (its log is shown when it is done)
# while the binaries and the images are made: the compile overlaps
# debootstrap's downloads. It runs at a lower CPU priority (nice 10):
# what the first result waits for first is the CLI, which builds the
# images, and then the images; runsc takes the CPU they leave.
runsc_log="$(mktemp /tmp/airlock-runsc-build-XXXXXX.log)"
runsc_step() {
	if [ -x "$RUNSC_BIN" ] && [ -f "$RUNSC_STAMP" ] && [ "$(cat "$RUNSC_STAMP")" = "$RUNSC_BUILD" ]; then
		echo "present: $RUNSC_BIN"
	else
		mkdir -p "$(dirname "$RUNSC_BIN")" "$(dirname "$RUNSC_STAMP")"
		build_runsc() {
			local mod src
			mod="$(cd / && go mod download -json "gvisor.dev/gvisor@${RUNSC_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
			[ -d "$mod" ] || return 1
			src="$(mktemp -d /tmp/airlock-runsc-XXXXXX)"
			local ok=0
			local t=$SECONDS
			cp -r "$mod/." "$src" && chmod -R u+w "$src" &&
				cp "$REPO/scripts/runsc-seccomp/gen.go" "$src/airlock_seccomp_gen.go" &&
				cp "$REPO/scripts/runsc-seccomp/bootsubset.go.in" "$src/runsc/boot/filter/config/airlock_subset.go" &&
				echo "generating the seccomp programs of the options airlockd uses..." &&
				(cd "$src" && CGO_ENABLED=0 go run "${RUNSC_FLAGS[@]}" airlock_seccomp_gen.go) &&
				echo "building runsc ($((SECONDS - t)) s so far)..." &&
				(cd "$src" && CGO_ENABLED=0 go build "${RUNSC_FLAGS[@]}" -ldflags='-s -w' -o "$RUNSC_BIN.new" ./runsc) &&
				mv "$RUNSC_BIN.new" "$RUNSC_BIN" && ok=1
			rm -rf "$src" "$RUNSC_BIN.new"
			[ "$ok" = 1 ] && echo "built in $((SECONDS - t)) s"
			[ "$ok" = 1 ]
		}
		if build_runsc; then
			echo "$RUNSC_BUILD" >"$RUNSC_STAMP"
			echo "installed $RUNSC_BIN"
		elif (cd / && CGO_ENABLED=0 GOBIN="$(dirname "$RUNSC_BIN")" go install "${RUNSC_FLAGS[@]}" -ldflags='-s -w' "gvisor.dev/gvisor/runsc@${RUNSC_VERSION}"); then
			echo "WARNING: the precompiled build failed; installed runsc without precompiled filters (slower starts)" >&2
			echo "$RUNSC_VERSION" >"$RUNSC_STAMP"
		else
			echo "WARNING: building runsc failed; falling back to Debian's runsc package," >&2
			echo "WARNING: which is older and may lack the systrap platform." >&2
			apt_install runsc
			echo "debian-package" >"$RUNSC_STAMP"
		fi
	fi
}
(
	# The lower priority is a nicety: a host that refuses it builds at
	# the usual one.
	renice -n 10 -p "$BASHPID" >/dev/null 2>&1 || true
	runsc_step
) >"$runsc_log" 2>&1 &
runsc_pid=$!
# A setup that stops early takes the build (go and its compilers) with it.
kill_tree() {
	local p
	for p in $(cat /proc/"$1"/task/*/children 2>/dev/null); do kill_tree "$p"; done
	kill "$1" 2>/dev/null || true
}
trap '[ -z "${runsc_pid:-}" ] || kill_tree "$runsc_pid"' EXIT
if [ -x "$RUNSC_BIN" ] && [ -f "$RUNSC_STAMP" ] && [ "$(cat "$RUNSC_STAMP")" = "$RUNSC_BUILD" ]; then
	wait "$runsc_pid"
	cat "$runsc_log"
	rm -f "$runsc_log"
	runsc_pid=""
else
	echo "building in the background (about 5-8 minutes on two cores; log: $runsc_log)"
fi
# runsc_wait waits for the background build and shows its log.
runsc_wait() {
	[ -n "$runsc_pid" ] || return 0
	step "runsc: waiting for its build to end (log: $runsc_log)"
	local rc=0
	wait "$runsc_pid" || rc=$?
	runsc_pid=""
	cat "$runsc_log"
	rm -f "$runsc_log"
	if [ "$rc" != 0 ]; then
		echo "setup: installing runsc failed (exit $rc)" >&2
		exit 1
	fi
}
# versitygw (tests only) builds in the background too, from here on, so
# its compile overlaps debootstrap's downloads instead of adding minutes
# at the end.
versitygw_present() { [ -x "$VERSITYGW_BIN" ] && [ -f "$VERSITYGW_STAMP" ] && [ "$(cat "$VERSITYGW_STAMP")" = "$VERSITYGW_VERSION" ]; }
versitygw_pid=""
if [ "$tests" = 1 ] && ! versitygw_present; then
	versitygw_log="$(mktemp /tmp/airlock-versitygw-build-XXXXXX.log)"
	(
		renice -n 10 -p "$BASHPID" >/dev/null 2>&1 || true
		t=$SECONDS
		mkdir -p "$(dirname "$VERSITYGW_BIN")"
		gobin="$(mktemp -d /tmp/airlock-versitygw-XXXXXX)"
		if ! (cd / && CGO_ENABLED=0 GOBIN="$gobin" go install -trimpath -buildvcs=false -ldflags='-s -w' \
			"github.com/versity/versitygw/cmd/versitygw@${VERSITYGW_VERSION}"); then
			rm -rf "$gobin"
			echo "setup: building versitygw failed" >&2
			exit 1
		fi
		mv "$gobin/versitygw" "$VERSITYGW_BIN"
		rm -rf "$gobin"
		echo "$VERSITYGW_VERSION" >"$VERSITYGW_STAMP"
		echo "installed $VERSITYGW_BIN in $((SECONDS - t)) s"
	) >"$versitygw_log" 2>&1 &
	versitygw_pid=$!
	trap '[ -z "${runsc_pid:-}" ] || kill_tree "$runsc_pid"; [ -z "${versitygw_pid:-}" ] || kill_tree "$versitygw_pid"' EXIT
	echo "versitygw ${VERSITYGW_VERSION} (tests only) builds in the background (log: $versitygw_log)"
fi
# versitygw_wait waits for that build and shows its log.
versitygw_wait() {
	step "versitygw ${VERSITYGW_VERSION} (the S3 server of the object-storage tests; tests only)"
	if [ -z "$versitygw_pid" ]; then
		echo "present: $VERSITYGW_BIN"
		return 0
	fi
	local rc=0
	wait "$versitygw_pid" || rc=$?
	versitygw_pid=""
	cat "$versitygw_log"
	rm -f "$versitygw_log"
	if [ "$rc" != 0 ]; then
		echo "setup: installing versitygw failed (exit $rc)" >&2
		exit 1
	fi
}
case ":$PATH:" in
*":$(dirname "$RUNSC_BIN"):"*) ;;
*) echo "note: $(dirname "$RUNSC_BIN") is not on PATH; airlockd looks runsc up there (scripts/run.sh adds it)" ;;
esac

if [ "$microvm" = 1 ]; then
	step "guest kernel for the microVM backend (Debian's linux-image-amd64, unpacked into $STATE_DIR/kernel)"
	# The kernel package linux-image-amd64 points at, downloaded with apt
	# and unpacked (dpkg-deb -x) into a directory named after its version:
	# the host's /boot and /lib/modules stay untouched, and the image
	# builder takes the newest directory there (see image.FindKernel).
	kpkg="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
	if [ -z "$kpkg" ]; then
		apt-get update -q
		apt_updated=1
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
fi

step "binaries (bin/airlock, then bin/airlockd while the images are built)"
cd "$REPO"
# The agent (above) is static: it runs inside every image. airlockd links
# the guard's Python grammar (tree-sitter, C) and so is built with cgo,
# and so is the CLI: with the same cgo setting the two share every
# compiled package (the CLI's are nearly all airlockd's), so airlockd's
# build after the CLI's only compiles what is airlockd's own. From an
# empty build cache that took the three builds from 364 to 296
# CPU-seconds (197 s to 158 s alone on this 2-core machine); the release
# builds its CLI static (scripts/release.sh).
# The CLI (whose image builder makes the images) comes first; airlockd,
# the largest, compiles while debootstrap downloads and unpacks the
# images' packages.
CGO_ENABLED=1 go build -trimpath -o bin/ ./cmd/airlock
echo "built bin/airlock ($((SECONDS - t0)) s since setup started)"

step "images ($images) in $STATE_DIR/images, in the background while airlockd is built; the first build takes minutes"
mkdir -p "$STATE_DIR"
chmod 0700 "$STATE_DIR"
guest=()
# "all" is base, then python-ds, whose stage is a copy of base's with its
# four extra packages installed by apt-get (no second debootstrap).
# --guest: the microVM backend's kernel, initramfs and root disk of each image too
[ "$microvm" = 1 ] && guest=(--guest)
# shellcheck disable=SC2086 # a list of names
bin/airlock node image build --state-dir "$STATE_DIR" --agent bin/airlock-agent "${guest[@]}" $images &
images_pid=$!
trap '[ -z "${runsc_pid:-}" ] || kill_tree "$runsc_pid"; [ -z "${images_pid:-}" ] || kill_tree "$images_pid"; [ -z "${versitygw_pid:-}" ] || kill_tree "$versitygw_pid"' EXIT
CGO_ENABLED=1 go build -trimpath -o bin/ ./cmd/airlockd
echo "built bin/airlockd ($((SECONDS - t0)) s since setup started)"
if [ "$tests" = 1 ]; then
	step "the tests' build cache, while the images are built (tests only)"
	# On a fresh machine debootstrap leaves a core idle for minutes; the
	# compiles test.sh needs next fill it: every package the tests import
	# (test-only modules included) built with -race and cgo as
	# `go test -race` builds them, without linking anything, then go vet
	# with test.sh's flags, whose results Go caches. On a warm machine
	# both are cache hits. A vet finding is not setup's to judge: test.sh's
	# vet step reports it.
	warm_log="$(mktemp /tmp/airlock-warm-build-XXXXXX.log)"
	t=$SECONDS
	# shellcheck disable=SC2046 # a list of import paths
	if CGO_ENABLED=1 go build -race $(go list -deps -test -f '{{if and (not .ForTest) (ne .Name "main") (not .Standard)}}{{.ImportPath}}{{end}}' ./...) >"$warm_log" 2>&1; then
		echo "race build of the tests' packages: $((SECONDS - t)) s"
	else
		echo "race build of the tests' packages failed (go test will say why); last lines:"
		tail -n 5 "$warm_log"
	fi
	t=$SECONDS
	CGO_ENABLED=1 go vet -race ./... >"$warm_log" 2>&1 || true
	echo "go vet: $((SECONDS - t)) s"
	rm -f "$warm_log"
fi
step "images: waiting for their build to end"
images_rc=0
wait "$images_pid" || images_rc=$?
images_pid=""
if [ "$images_rc" != 0 ]; then
	echo "setup: building the images failed (exit $images_rc)" >&2
	exit 1
fi
bin/airlock node image ls --state-dir "$STATE_DIR"
runsc_wait

if [ "$tests" = 1 ]; then
	step "PostgreSQL server binaries (the PostgreSQL store's tests; tests only)"
	# The tests start throwaway servers of their own (internal/testpg:
	# initdb in a temporary directory, a unix socket there, as the
	# postgres user); they never use the cluster Debian's package creates.
	pg_initdb() {
		ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1
	}
	if [ -n "$(pg_initdb)" ] && [ -x "$(dirname "$(pg_initdb)")/postgres" ]; then
		echo "present: $(dirname "$(pg_initdb)")"
	else
		echo "installing: postgresql"
		apt_install postgresql
		if [ -z "$(pg_initdb)" ]; then
			echo "setup: installed postgresql but found no /usr/lib/postgresql/*/bin/initdb" >&2
			exit 1
		fi
		echo "installed: $(dirname "$(pg_initdb)")"
	fi
	id postgres >/dev/null 2>&1 || { echo "setup: the postgresql package made no postgres user" >&2; exit 1; }

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
		exit 1
	fi

	versitygw_wait
fi

step "setup done in $((SECONDS - t0)) s"

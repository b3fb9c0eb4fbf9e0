#!/bin/sh
# Installs an Airlock release (the folder this script is in, unpacked
# from dist/airlock-<version>-linux-amd64.tar.gz). Needs no Go and
# nothing from the network but Debian's packages: debootstrap,
# debian-archive-keyring, ca-certificates and e2fsprogs (installed with
# apt-get when missing), from which the sandbox images are built.
#
#   sudo ./install.sh [--prefix DIR] [--state-dir DIR] [--images NAMES] [--no-images] [--no-apt]
#
#   --prefix DIR     binaries (airlockd, airlock, airlock-agent, runsc) in
#                    DIR/bin, docs in DIR/share/doc/airlock, the systemd
#                    units in DIR/share/airlock/systemd (default /usr/local,
#                    where the units look: /usr/local/bin/airlockd)
#   --state-dir DIR  where the images are built (default /var/lib/airlock)
#   --images NAMES   the images to build now, comma-separated, or "all"
#                    (default base: airlockd builds python-ds in the
#                    background once it serves, and runs Python that
#                    needs nothing of it on base until then)
#   --no-images      build no image now (airlockd builds them all in the
#                    background, and serves once base is built)
#   --no-apt         install no Debian packages; fail if one is missing
#
# Then: DIR/bin/airlockd --state-dir STATE (or install the unit:
# cp DIR/share/airlock/systemd/airlockd.service /etc/systemd/system/).
set -eu
HERE="$(cd "$(dirname "$0")" && pwd)"
PREFIX=/usr/local
STATE_DIR=/var/lib/airlock
images=1
names=base
apt=1
while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) PREFIX="$2"; shift 2 ;;
	--prefix=*) PREFIX="${1#*=}"; shift ;;
	--state-dir) STATE_DIR="$2"; shift 2 ;;
	--state-dir=*) STATE_DIR="${1#*=}"; shift ;;
	--images) names="$2"; shift 2 ;;
	--images=*) names="${1#*=}"; shift ;;
	--no-images) images=0; shift ;;
	--no-apt) apt=0; shift ;;
	-h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ "$(id -u)" != 0 ]; then
	echo "install.sh: must run as root (airlockd runs runsc; the image build runs debootstrap)" >&2
	exit 1
fi

echo "==> Debian packages: debootstrap debian-archive-keyring ca-certificates e2fsprogs"
need=""
command -v debootstrap >/dev/null || need="$need debootstrap"
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need="$need debian-archive-keyring"
[ -e /etc/ssl/certs/ca-certificates.crt ] || need="$need ca-certificates"
command -v mkfs.ext4 >/dev/null || need="$need e2fsprogs"
if [ -n "$need" ]; then
	if [ "$apt" = 0 ]; then
		echo "install.sh: missing Debian packages:$need (--no-apt given)" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $need
else
	echo "all present"
fi

echo "==> binaries into $PREFIX/bin"
mkdir -p "$PREFIX/bin" "$PREFIX/share/doc/airlock" "$PREFIX/share/airlock/systemd" "$PREFIX/share/airlock/kubernetes"
for b in airlockd airlock airlock-agent runsc; do
	install -m 0755 "$HERE/bin/$b" "$PREFIX/bin/$b.new"
	mv "$PREFIX/bin/$b.new" "$PREFIX/bin/$b"
done
cp -R "$HERE/doc/." "$PREFIX/share/doc/airlock/"
cp -R "$HERE/systemd/." "$PREFIX/share/airlock/systemd/"
cp -R "$HERE/kubernetes/." "$PREFIX/share/airlock/kubernetes/"
if [ "$PREFIX" != /usr/local ]; then
	# The units name /usr/local: point them at this prefix.
	sed -i "s|/usr/local/|$PREFIX/|g" "$PREFIX/share/airlock/systemd/"*.service
fi
"$PREFIX/bin/airlockd" --version

if [ "$images" = 1 ]; then
	names="$(printf '%s' "$names" | tr ',' ' ')"
	echo "==> images ($names) in $STATE_DIR/images (debootstrap from Debian's packages: minutes the first time)"
	mkdir -p "$STATE_DIR"
	chmod 0700 "$STATE_DIR"
	# shellcheck disable=SC2086 # a list of names
	"$PREFIX/bin/airlock" node image build --state-dir "$STATE_DIR" --agent "$PREFIX/bin/airlock-agent" $names
fi
echo "==> installed; start with: $PREFIX/bin/airlockd --state-dir $STATE_DIR"
echo "    (airlockd builds any image still missing in the background once it serves)"

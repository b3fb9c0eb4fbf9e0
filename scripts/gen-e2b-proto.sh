#!/usr/bin/env bash
# Regenerates the Go code of the E2B wire (api/e2b/internal/envdpb) from our
# own .proto files in api/e2b/proto. The generated code is committed, so
# neither CI nor a build needs protoc; run this after editing a .proto.
#
# Pinned: protoc from Debian 12's protobuf-compiler (3.21.12, with
# libprotobuf-dev for google/protobuf/timestamp.proto), and the two
# plugins at exact versions from the Go module proxy, installed into a
# temporary GOBIN. The output is the same on every run.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROTOC_WANT="3.21.12"
PROTOC_GEN_GO="google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12"
PROTOC_GEN_CONNECT_GO="connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1"

if ! command -v protoc >/dev/null || [ ! -e /usr/include/google/protobuf/timestamp.proto ]; then
	echo "gen-e2b-proto: needs protoc and google/protobuf/timestamp.proto: apt-get install protobuf-compiler libprotobuf-dev" >&2
	exit 1
fi
have="$(protoc --version | awk '{print $2}')"
if [ "$have" != "$PROTOC_WANT" ]; then
	echo "gen-e2b-proto: protoc $have; the committed code was made with $PROTOC_WANT (Debian 12's protobuf-compiler)" >&2
	exit 1
fi
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
GOBIN="$bin" go install "$PROTOC_GEN_GO"
GOBIN="$bin" go install "$PROTOC_GEN_CONNECT_GO"

out="$REPO/api/e2b/internal/envdpb"
rm -rf "$out/process" "$out/filesystem"
mkdir -p "$out"
cd "$REPO/api/e2b/proto"
PATH="$bin:$PATH" protoc -I . -I /usr/include \
	--go_out="$out" --go_opt=module=github.com/airlockhq/airlock/api/e2b/internal/envdpb \
	--connect-go_out="$out" --connect-go_opt=module=github.com/airlockhq/airlock/api/e2b/internal/envdpb \
	process/process.proto filesystem/filesystem.proto
gofmt -l "$out" | (! grep .) || { echo "gen-e2b-proto: generated code is not gofmt-clean" >&2; exit 1; }
echo "generated into $out"

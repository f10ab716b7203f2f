#!/usr/bin/env bash
# Provides toxiproxy-server, the TCP fault proxy the fault campaign puts between each operator replica
# and Redis / the API server (tests/testsupport/faultproxy.py): from $AGENTIHOOKS_TOXIPROXY when that
# names an executable, otherwise built once with this machine's Go from the Go module proxy into a cache
# outside the repository (about 20 s cold) and reused. Prints the binary's path on its last line.
#
#   scripts/fault-proxy.sh            # find or build; print the path
#   scripts/fault-proxy.sh --check    # exit 0 if the binary is present, 1 otherwise (no build)
#
# Environment: AGENTIHOOKS_TOXIPROXY (a binary you provide), AGENTIHOOKS_TOOLS_CACHE (default
# ~/.cache/agentihooks), AGENTIHOOKS_TOXIPROXY_VERSION (default the pinned v2.5.0).
set -euo pipefail

VERSION="${AGENTIHOOKS_TOXIPROXY_VERSION:-v2.5.0}"

if [ -n "${AGENTIHOOKS_TOXIPROXY:-}" ]; then
  if [ -x "$AGENTIHOOKS_TOXIPROXY" ]; then
    echo "$AGENTIHOOKS_TOXIPROXY"
    exit 0
  fi
  echo "fault-proxy: AGENTIHOOKS_TOXIPROXY=$AGENTIHOOKS_TOXIPROXY is not an executable" >&2
  exit 2
fi

root="${AGENTIHOOKS_TOOLS_CACHE:-$HOME/.cache/agentihooks}/toxiproxy-$VERSION"
out="$root/bin/toxiproxy-server"
if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "fault-proxy: no $out and no Go to build it; set AGENTIHOOKS_TOXIPROXY" >&2
  exit 2
fi
start=$(date +%s)
mkdir -p "$root/gopath" "$root/bin.part"
export GOPATH="$root/gopath" GOMODCACHE="$root/gopath/pkg/mod" GOCACHE="$root/gocache" GOFLAGS=-mod=mod CGO_ENABLED=0
trap 'rm -rf "$GOCACHE" "$root/bin.part"' EXIT
echo "fault-proxy: building toxiproxy-server $VERSION from the Go module proxy" >&2
GOBIN="$root/bin.part" go install "github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION" >&2
mkdir -p "$root/bin"
mv "$root/bin.part/server" "$out"
chmod -R u+w "$root/gopath" && rm -rf "$root/gopath"
echo "fault-proxy: built in $(( $(date +%s) - start ))s ($out)" >&2
echo "$out"

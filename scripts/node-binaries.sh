#!/usr/bin/env bash
# Provides kubelet, kube-scheduler and kube-proxy at the control plane's pinned Kubernetes version, for
# the real-node test tier (tests/testsupport/realnode.py): from $AGENTIHOOKS_NODE_BINARIES when that
# folder holds all three, otherwise built with this machine's Go from the Go module proxy into a cache
# outside the repository and reused (the same module recipe as scripts/control-plane.sh, whose module
# download it shares). Prints the folder that holds the binaries on its last line of stdout.
#
#   scripts/node-binaries.sh            # find or build; print the folder
#   scripts/node-binaries.sh --check    # exit 0 if the binaries are present, 1 otherwise (no build)
#
# Environment: AGENTIHOOKS_NODE_BINARIES (a folder you provide), AGENTIHOOKS_CONTROL_PLANE_CACHE
# (default ~/.cache/agentihooks/control-plane), AGENTIHOOKS_KUBE_VERSION.
set -euo pipefail

KUBE_VERSION="${AGENTIHOOKS_KUBE_VERSION:-v1.35.4}"
BINARIES=(kubelet kube-scheduler kube-proxy)

have_all() {
  local dir="$1" b
  for b in "${BINARIES[@]}"; do [ -x "$dir/$b" ] || return 1; done
}

if [ -n "${AGENTIHOOKS_NODE_BINARIES:-}" ]; then
  if have_all "$AGENTIHOOKS_NODE_BINARIES"; then
    echo "$AGENTIHOOKS_NODE_BINARIES"
    exit 0
  fi
  echo "node-binaries: AGENTIHOOKS_NODE_BINARIES=$AGENTIHOOKS_NODE_BINARIES lacks one of ${BINARIES[*]}" >&2
  exit 2
fi

cache_root="${AGENTIHOOKS_CONTROL_PLANE_CACHE:-$HOME/.cache/agentihooks/control-plane}"
out="$cache_root/$KUBE_VERSION-node/bin"
if have_all "$out"; then
  echo "$out"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "node-binaries: no binaries in $out and no Go to build them; set AGENTIHOOKS_NODE_BINARIES" >&2
  exit 2
fi

work="$cache_root/$KUBE_VERSION-node/src"
mkdir -p "$work" "$out.part"
start=$(date +%s)
export GOFLAGS=-mod=mod CGO_ENABLED=0
export GOCACHE="$work/gocache"
trap 'rm -rf "$GOCACHE"' EXIT
. "$(dirname "$0")/lib/kube-module.sh"

echo "node-binaries: building kubelet, kube-scheduler and kube-proxy $KUBE_VERSION (cold: ~6 min on 2 cores)" >&2
kube_module "$work" agentihooks.local/node "$KUBE_VERSION"
(
  cd "$work"
  go get "k8s.io/kubernetes/cmd/kubelet@$KUBE_VERSION" "k8s.io/kubernetes/cmd/kube-scheduler@$KUBE_VERSION" \
    "k8s.io/kubernetes/cmd/kube-proxy@$KUBE_VERSION" >&2
  ldflags=$(kube_ldflags "$KUBE_VERSION")
  go build -trimpath -ldflags "$ldflags" -o "$out.part/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
)
rm -rf "$out"
mv "$out.part" "$out"
echo "node-binaries: built in $(( $(date +%s) - start ))s ($out)" >&2
echo "$out"

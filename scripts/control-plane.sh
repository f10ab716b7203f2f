#!/usr/bin/env bash
# Provides etcd, kube-apiserver and kube-controller-manager at one pinned Kubernetes version, the
# envtest way: from $KUBEBUILDER_ASSETS when it holds them (e.g. `setup-envtest use 1.35`), otherwise
# built with this machine's Go from the Go module proxy into a cache outside the repository and reused.
# Prints the folder that holds the three binaries on its last line of stdout.
#
#   scripts/control-plane.sh            # find or build; print the folder
#   scripts/control-plane.sh --check    # exit 0 if the binaries are present, 1 otherwise (no build)
#
# Environment: AGENTIHOOKS_CONTROL_PLANE_CACHE (default ~/.cache/agentihooks/control-plane),
# KUBEBUILDER_ASSETS, GOTOOLCHAIN (when the pinned module needs a newer Go than the machine's).
set -euo pipefail

KUBE_VERSION="${AGENTIHOOKS_KUBE_VERSION:-v1.35.4}"
ETCD_VERSION="${AGENTIHOOKS_ETCD_VERSION:-v3.6.5}"
BINARIES=(etcd kube-apiserver kube-controller-manager)

have_all() {
  local dir="$1" b
  for b in "${BINARIES[@]}"; do [ -x "$dir/$b" ] || return 1; done
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  if have_all "$KUBEBUILDER_ASSETS"; then
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  echo "control-plane: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks one of ${BINARIES[*]};" \
    "envtest's asset folders have no kube-controller-manager, so it is built here" >&2
fi

cache_root="${AGENTIHOOKS_CONTROL_PLANE_CACHE:-$HOME/.cache/agentihooks/control-plane}"
out="$cache_root/$KUBE_VERSION-etcd-$ETCD_VERSION/bin"
if have_all "$out"; then
  echo "$out"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "control-plane: no binaries in $out and no Go to build them; set KUBEBUILDER_ASSETS" >&2
  exit 2
fi

work="$cache_root/$KUBE_VERSION-etcd-$ETCD_VERSION/src"
mkdir -p "$work/kube" "$work/etcd" "$out.part"
start=$(date +%s)
export GOFLAGS=-mod=mod CGO_ENABLED=0
# The compile cache is only needed during the build (~3 GB); the module cache (~0.8 GB) stays in Go's
# usual place so a later version bump downloads less.
export GOCACHE="$work/gocache"
trap 'rm -rf "$GOCACHE"' EXIT
. "$(dirname "$0")/lib/kube-module.sh"

echo "control-plane: building kube-apiserver and kube-controller-manager $KUBE_VERSION (cold: ~6 min on 2 cores)" >&2
kube_module "$work/kube" agentihooks.local/controlplane "$KUBE_VERSION"
(
  cd "$work/kube"
  go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBE_VERSION" >&2
  ldflags=$(kube_ldflags "$KUBE_VERSION")
  go build -trimpath -ldflags "$ldflags" -o "$out.part/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
)
echo "control-plane: building etcd $ETCD_VERSION" >&2
(
  cd "$work/etcd"
  printf 'module agentihooks.local/etcd\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >go.mod
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
  go build -trimpath -ldflags "-s -w" -o "$out.part/etcd" go.etcd.io/etcd/server/v3
)
rm -rf "$out"
mv "$out.part" "$out"
echo "control-plane: built in $(( $(date +%s) - start ))s; cache $(du -sh "$cache_root" | cut -f1) ($cache_root)" >&2
echo "$out"

#!/usr/bin/env bash
# Builds the project's two images on this machine, with no registry: deploy/Dockerfile.operator and
# deploy/Dockerfile.worker, built by buildah FROM local bases, written as docker-archive tarballs that
# `ctr images import` (the real node, tests/testsupport/realnode.py) or `docker load` takes.
#
#   scripts/images.sh            # find or build both; print "<ref> <tarball>" per image on stdout
#   scripts/images.sh --check    # exit 0 if both tarballs of the current inputs exist, 1 otherwise
#
# The bases the Dockerfiles name (python:…-slim-bookworm, node:…-bookworm-slim) come from a registry
# this machine cannot reach; the Dockerfiles take them as build arguments, so here:
#   - PYTHON_IMAGE is a Debian bookworm made with mmdebstrap (python3, pip, venv, `python`, passwd,
#     ca-certificates; pip may install into it, as in the python image);
#   - NODE_IMAGE holds this machine's own Node.js (node and npm at /usr/local, as the node image has).
# A user building for a cluster runs `docker build` and gets the defaults.
#
# Each tarball is named by a hash of everything its build reads (the Dockerfile, the sources it
# copies, the lock file, the base recipe, the node binary), so a changed input rebuilds it and an
# unchanged one is reused. A build behind a TLS-inspecting proxy gets this machine's CA bundle
# mounted for its RUN steps only (PIP_CERT, NODE_EXTRA_CA_CERTS); it never lands in an image.
#
# Environment: AGENTIHOOKS_IMAGE_CACHE (default ~/.cache/agentihooks/images), AGENTIHOOKS_DEBIAN_MIRROR
# (default http://deb.debian.org/debian).
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE="${AGENTIHOOKS_IMAGE_CACHE:-$HOME/.cache/agentihooks/images}"
MIRROR="${AGENTIHOOKS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CA_BUNDLE="/etc/ssl/certs/ca-certificates.crt"
BASE_PACKAGES="python3,python3-pip,python3-venv,python-is-python3,passwd,ca-certificates"
REGISTRY="agentihooks.local"
mkdir -p "$CACHE"

step=""
fail() { echo "images: step '$step' failed${1:+: $1}" >&2; exit 1; }
trap 'fail' ERR

pin() { sed -n "s/^ARG $1=//p" deploy/Dockerfile.worker; }
APP_VERSION="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/agentihooks-recovery/Chart.yaml)"
# The worker's tag is the checkpoints' compatibility key (deploy/Dockerfile.worker's header).
WORKER_TAG="${APP_VERSION}-claude$(pin CLAUDE_CODE_VERSION)-codex$(pin CODEX_VERSION)"
OPERATOR_REF="$REGISTRY/agentihooks-operator:$APP_VERSION"
WORKER_REF="$REGISTRY/agentihooks-worker:$WORKER_TAG"

# What a build copies from the checkout, hashed by content (compiled files left out).
sources_hash() {
  {
    printf '%s\n' "$@"
    find pyproject.toml README.md LICENSE requirements.lock operator worker -type f \
      ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info/*' -print0 |
      sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}

node_bin() { command -v node || true; }
npm_dir() { local n; n="$(node_bin)"; readlink -f "$(dirname "$(readlink -f "$n")")/../lib/node_modules/npm"; }

BASE_HASH="$(printf '%s %s bookworm\n' "$BASE_PACKAGES" "$MIRROR" | sha256sum | cut -c1-16)"
BASE_REF="localhost/agentihooks-base:bookworm-$BASE_HASH"
NODE_HASH="$( { sha256sum "$(node_bin)" 2>/dev/null || echo none; } | sha256sum | cut -c1-16)"
NODE_REF="localhost/agentihooks-node:$NODE_HASH"
OPERATOR_TAR="$CACHE/operator-$(sources_hash "$BASE_HASH" "$(sha256sum deploy/Dockerfile.operator)").tar"
WORKER_TAR="$CACHE/worker-$(sources_hash "$BASE_HASH" "$NODE_HASH" "$(sha256sum deploy/Dockerfile.worker)").tar"

if [ "${1:-}" = "--check" ]; then
  [ -s "$OPERATOR_TAR" ] && [ -s "$WORKER_TAR" ]
  exit
fi

have_local() { buildah inspect --type image "$1" >/dev/null 2>&1; }

base_image() {
  have_local "$BASE_REF" && return
  step="debian base (mmdebstrap)"
  local rootfs="$CACHE/base-$BASE_HASH.tar" ctr
  if [ ! -s "$rootfs" ]; then
    # the output's name ends in .tar: mmdebstrap picks its format from it
    mmdebstrap --quiet --variant=minbase --include="$BASE_PACKAGES" \
      --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
      bookworm "$CACHE/base-$BASE_HASH.part.tar" "$MIRROR" >&2
    mv "$CACHE/base-$BASE_HASH.part.tar" "$rootfs"
  fi
  step="debian base (import)"
  ctr="$(buildah from scratch)"
  buildah add --quiet "$ctr" "$rootfs" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$ctr"
  buildah commit --quiet --rm "$ctr" "$BASE_REF" >/dev/null
}

node_image() {
  have_local "$NODE_REF" && return
  step="node base (this machine's Node.js)"
  [ -n "$(node_bin)" ] || fail "no node on PATH (scripts/install-deps.sh installs Node.js)"
  if ldd "$(readlink -f "$(node_bin)")" 2>/dev/null | grep -q 'libnode\|not found'; then
    fail "$(node_bin) needs a shared libnode; the image needs a self-contained node (nodejs.org or NodeSource build)"
  fi
  local ctr
  ctr="$(buildah from scratch)"
  buildah copy --quiet "$ctr" "$(readlink -f "$(node_bin)")" /usr/local/bin/node >/dev/null
  buildah copy --quiet "$ctr" "$(npm_dir)" /usr/local/lib/node_modules/npm >/dev/null
  buildah commit --quiet --rm "$ctr" "$NODE_REF" >/dev/null
}

# build <name> <Dockerfile> <ref> <tarball> [build-arg...]
build() {
  local name="$1" file="$2" ref="$3" tar="$4" ca=()
  shift 4
  [ -s "$tar" ] && return
  if [ -s "$CA_BUNDLE" ]; then
    ca=(-v "$CA_BUNDLE:/run/build-ca.crt:ro" --build-arg PIP_CERT=/run/build-ca.crt
      --build-arg NODE_EXTRA_CA_CERTS=/run/build-ca.crt)
  fi
  step="$name image ($file)"
  local log="$CACHE/$name-build.log"
  if ! buildah bud --layers --isolation chroot -f "$file" -t "$ref" \
    --build-arg PYTHON_IMAGE="$BASE_REF" --build-arg VERSION="$APP_VERSION" \
    --build-arg REVISION="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "${ca[@]}" "$@" . >"$log" 2>&1; then
    fail "$(grep -E '^(STEP|\[[0-9]+/[0-9]+\] STEP)' "$log" | tail -1); its log: $log"
  fi
  step="$name image (export)"
  rm -f "$tar.part"
  buildah push --quiet "$ref" "docker-archive:$tar.part:$ref" >/dev/null
  mv "$tar.part" "$tar"
  # Earlier builds of this image (other sources) are never used again: each is 0.5-1.6 GB, and a
  # machine that builds many commits filled its disk with them.
  find "$CACHE" -maxdepth 1 -name "$name-*.tar" ! -name "$(basename "$tar")" -delete
}

for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null || { step="tools"; fail "$tool is missing (scripts/install-deps.sh installs it)"; }
done
if [ ! -s "$OPERATOR_TAR" ] || [ ! -s "$WORKER_TAR" ]; then
  base_image
fi
build operator deploy/Dockerfile.operator "$OPERATOR_REF" "$OPERATOR_TAR"
if [ ! -s "$WORKER_TAR" ]; then
  node_image
  build worker deploy/Dockerfile.worker "$WORKER_REF" "$WORKER_TAR" --build-arg NODE_IMAGE="$NODE_REF"
fi
trap - ERR
echo "$OPERATOR_REF $OPERATOR_TAR"
echo "$WORKER_REF $WORKER_TAR"

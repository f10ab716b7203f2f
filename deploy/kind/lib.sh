# Shared settings of the kind harness scripts (sourced, not run).
# shellcheck shell=bash
set -euo pipefail

KIND_DIR="$(cd "${BASH_SOURCE[0]%/*}" && pwd)"
REPO_ROOT="$(cd "$KIND_DIR/../.." && pwd)"
CLUSTER_NAME="${AGENTIHOOKS_KIND_CLUSTER:-agentihooks-e2e}"
NAMESPACE="${AGENTIHOOKS_KIND_NAMESPACE:-agentihooks}"
RELEASE="${AGENTIHOOKS_KIND_RELEASE:-agentihooks}"
KUBE_CONTEXT="kind-${CLUSTER_NAME}"

# The worker image tag is the compatibility key: derive it from the harness pins in the Dockerfile.
pin() { sed -n "s/^ARG $1=//p" "$REPO_ROOT/deploy/Dockerfile.worker"; }
APP_VERSION="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$REPO_ROOT/charts/agentihooks-recovery/Chart.yaml")"
WORKER_TAG="${APP_VERSION}-claude$(pin CLAUDE_CODE_VERSION)-codex$(pin CODEX_VERSION)"
OPERATOR_IMAGE="agentihooks/agentihooks-operator:e2e"
WORKER_IMAGE="agentihooks/agentihooks-worker:${WORKER_TAG}"

# Prefer the pinned helm/kubectl that scripts/install-deps.sh installs.
TOOLS_BIN="${AGENTIHOOKS_TOOLS_DIR:-$HOME/.cache/agentihooks-tools}/bin"
if [ -d "$TOOLS_BIN" ]; then PATH="$TOOLS_BIN:$PATH"; fi
export PATH

kc() { kubectl --context "$KUBE_CONTEXT" "$@"; }

need() {
  local missing=()
  for tool in "$@"; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "kind harness: missing ${missing[*]} (see docs/install.md, 'kind harness')" >&2
    exit 3
  fi
  if [[ " $* " == *" docker "* ]] && ! docker info >/dev/null 2>&1; then
    echo "kind harness: no Docker engine answers (docker info failed)" >&2
    exit 3
  fi
}

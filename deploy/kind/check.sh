#!/usr/bin/env bash
# Run one end-to-end check (oom | evict | node-loss | bad-image) against the cluster from up.sh.
# Prints one JSON line with the reason, the number of replacements (must be 1) and the continuity.
source "${BASH_SOURCE[0]%/*}/lib.sh"
need docker kubectl python3
scenario="${1:?usage: check.sh oom|evict|node-loss|bad-image}"
exec python3 "$KIND_DIR/e2e_checks.py" "$scenario" \
  --context "$KUBE_CONTEXT" --namespace "$NAMESPACE" --release "$RELEASE" --cluster "$CLUSTER_NAME" \
  --worker-image "$WORKER_IMAGE"

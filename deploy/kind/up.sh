#!/usr/bin/env bash
# Create the kind cluster, build and load both images, install the chart with real Secrets, and apply
# the end-to-end Swarm. Idempotent: re-running reuses the cluster and upgrades the release.
source "${BASH_SOURCE[0]%/*}/lib.sh"
need docker kind kubectl helm openssl

if ! kind get clusters | grep -qx "$CLUSTER_NAME"; then
  kind create cluster --config "$KIND_DIR/cluster.yaml" --name "$CLUSTER_NAME" --wait 120s
fi
# Only the operator and Redis (which tolerate this taint) run on the system node.
kc taint nodes -l agentihooks.io/role=system agentihooks.io/system=true:NoSchedule --overwrite

docker build -f "$REPO_ROOT/deploy/Dockerfile.operator" -t "$OPERATOR_IMAGE" "$REPO_ROOT"
docker build -f "$REPO_ROOT/deploy/Dockerfile.worker" -t "$WORKER_IMAGE" "$REPO_ROOT"
kind load docker-image --name "$CLUSTER_NAME" "$OPERATOR_IMAGE" "$WORKER_IMAGE"

kc create namespace "$NAMESPACE" --dry-run=client -o yaml | kc apply -f -
# Credentials are generated here, inside the cluster only; never in chart values.
secret() {
  kc -n "$NAMESPACE" get secret "$1" >/dev/null 2>&1 \
    || kc -n "$NAMESPACE" create secret generic "$1" --from-literal="$2=$(openssl rand -hex 32)"
}
secret agentihooks-redis redis-password
secret agentihooks-operator-token token
secret e2e-master-credential token

helm --kube-context "$KUBE_CONTEXT" upgrade --install "$RELEASE" "$REPO_ROOT/charts/agentihooks-recovery" \
  --namespace "$NAMESPACE" --values "$KIND_DIR/values.yaml" --wait --timeout 5m
kc -n "$NAMESPACE" rollout status "deployment/$RELEASE-agentihooks-recovery" --timeout 180s

# Worker Pods get a memory limit from this LimitRange, so the OOM check kills a container, not the node.
kc -n "$NAMESPACE" apply -f "$KIND_DIR/limitrange.yaml"
sed "s#@WORKER_IMAGE@#$WORKER_IMAGE#" "$KIND_DIR/e2e-swarm.yaml" | kc -n "$NAMESPACE" apply -f -
echo "kind harness ready: context $KUBE_CONTEXT, namespace $NAMESPACE, worker image $WORKER_IMAGE"

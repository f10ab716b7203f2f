#!/usr/bin/env bash
# Laptop entry point: up.sh, then every check in turn. Set KEEP_CLUSTER=1 to keep the cluster after.
source "${BASH_SOURCE[0]%/*}/lib.sh"
"$KIND_DIR/up.sh"
status=0
for scenario in oom evict node-loss bad-image; do
  "$KIND_DIR/check.sh" "$scenario" || status=1
done
if [ "${KEEP_CLUSTER:-0}" != 1 ]; then "$KIND_DIR/down.sh"; fi
exit "$status"

#!/usr/bin/env bash
# The real-node tier's host-wide state (tests/testsupport/realnode.py):
#   scripts/node.sh check   # can this machine host a node (root, memory cgroup, containerd, runc, CNI)?
#   scripts/node.sh clean   # remove what a killed run left: processes and shims, mounts, netns, the
#                           # agentihooks0 bridge, the node address on lo, KUBE-/CNI- chains, cgroups
# The tests bring the node up and down themselves (one per machine at a time: they hold ROOT/lock).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHONPATH=tests exec "${AGENTIHOOKS_VENV:-.venv}/bin/python" -m testsupport.realnode "$@"

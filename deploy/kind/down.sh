#!/usr/bin/env bash
# Delete the kind cluster (and with it every checkpoint written in it: it is a test cluster).
source "${BASH_SOURCE[0]%/*}/lib.sh"
need kind
kind delete cluster --name "$CLUSTER_NAME"

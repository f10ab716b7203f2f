{{/*
The operator's permissions, written once and used by both the per-namespace Roles and the cluster-wide
ClusterRole. tests/unit/chart/test_rbac.py compares these rules with the API calls the operator's own
tests recorded: nothing missing, nothing extra. Every rule says why the operator needs it.
*/}}

{{/* Rules on namespaced objects of the watched namespaces. */}}
{{- define "agentihooks.rbac.namespacedRules" -}}
# Swarms: kopf lists and watches them to run recovery passes, and patches them to keep its
# finalizer and handler-progress annotations; a condition write reads the one Swarm first (get), so
# it replaces only its own conditions and carries the resourceVersion it read.
- apiGroups: ["agentihooks.io"]
  resources: ["swarms"]
  verbs: ["get", "list", "watch", "patch"]
# Swarm status: each pass publishes the seats and handoff cards seen by `kubectl get swarms`.
- apiGroups: ["agentihooks.io"]
  resources: ["swarms/status"]
  verbs: ["patch"]
# Worker Pods: listed and watched to classify failed attempts (OOM kill, eviction, node loss, image
# pull); created once per decision; read by name to observe a create whose outcome is unknown after a
# restart; deleted once fenced.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete"]
# Launch records of attempts an earlier release launched (the ConfigMap `swarm-<execution_id>-launch`;
# a launch record is now a key of the attempt's Secret): listed once per operator process and deleted
# with their fenced attempt. No ConfigMap is created or read any more; this rule goes in the next release.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["list", "delete"]
# Secrets: each attempt's worker credential and launch record are created with it (patched when a
# crashed launch left one behind) and deleted when the attempt is fenced, so fencing revokes it; the
# control API reads the masters' credential Secrets named in the Swarm.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch", "delete"]
# PersistentVolumeClaims: read by name before a launch, only for their labels: a Swarm may mount or
# clone a claim, or keep checkpoints on one, only when its owner lent it (docs/security.md).
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get"]
# Events: every fence, decision, replacement and outcome is reported as an Event.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{/* Rules on cluster-scoped objects: needed in both modes, always in a ClusterRole. */}}
{{- define "agentihooks.rbac.clusterRules" -}}
# Nodes: a worker whose node is NotReady or gone is classified node_lost (read-only; without it,
# node loss is seen only once the Pod status says so).
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list"]
{{- end -}}

{{/* Rules in the release namespace when it is not watched (rbac-peers.yaml). */}}
{{- define "agentihooks.rbac.peerRules" -}}
# Operator Pods: read by name before forwarding, to check an advertised address is that Pod's IP.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get"]
{{- end -}}

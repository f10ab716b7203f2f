{{/*
The operator's permissions, written once and used by both the per-namespace Roles and the cluster-wide
ClusterRole. tests/unit/chart/test_rbac.py compares these rules with the API calls the operator's own
tests recorded: nothing missing, nothing extra. Every rule says why the operator needs it.
*/}}

{{/* Rules on namespaced objects of the watched namespaces. */}}
{{- define "agentihooks.rbac.namespacedRules" -}}
# Swarms: kopf lists and watches them to run recovery passes, and patches them to keep its
# finalizer and handler-progress annotations.
- apiGroups: ["agentihooks.io"]
  resources: ["swarms"]
  verbs: ["get", "list", "watch", "patch"]
# Swarm status: each pass publishes the seats, handoffs and continuity seen by `kubectl get swarms`.
- apiGroups: ["agentihooks.io"]
  resources: ["swarms/status"]
  verbs: ["patch"]
# Worker Pods: read to classify failed attempts (OOM kill, eviction, node loss, image pull), create
# exactly one replacement per decision (a GET of the known name answers an unknown create after a
# restart), delete fenced Pods.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete"]
# Launch records: the ConfigMap `swarm-<execution_id>-launch` mounted into each worker; read back to
# observe a create whose outcome is unknown, deleted with the fenced attempt.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "delete"]
# Secrets: read the masters' credential Secrets named in the Swarm, and create/delete each attempt's
# worker credential so that fencing revokes it.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "delete"]
# Events: every fence and recovery decision is reported as a Kubernetes Event on the Swarm.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{/* Rules on cluster-scoped objects: needed in both modes, always in a ClusterRole. */}}
{{- define "agentihooks.rbac.clusterRules" -}}
# Namespaces: kopf observes which namespaces exist so its watchers follow them.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["list", "watch"]
# Nodes: a worker whose node is NotReady or gone is classified node_lost (read-only; without it,
# node loss is seen only once the Pod status says so).
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list"]
# CustomResourceDefinitions: kopf observes CRDs so it starts watching Swarms once the CRD is served.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- end -}}

{{/*
Names, labels and the few cross-object values every template shares.
*/}}

{{- define "agentihooks.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The base of every object name: at most 46 characters, so each name made from it fits Kubernetes'
limits whatever release name Helm accepts (53 characters): the Redis StatefulSet `<base>-redis`
stays within 52 (its Pods' controller-revision-hash label adds 11), its headless Service
`<base>-redis-headless` within 63 (a DNS label), the uninstall Job `<base>-uninstall` within 63. A
longer name is cut to 39 characters and given 6 hex digits of its own sha256, so two long release
names never meet in one name. tests/unit/chart/test_names.py renders every name for long releases.
*/}}
{{- define "agentihooks.fullname" -}}
{{- $full := "" -}}
{{- if .Values.fullnameOverride -}}
{{- $full = .Values.fullnameOverride -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- $full = .Release.Name -}}
{{- else -}}
{{- $full = printf "%s-%s" .Release.Name $name -}}
{{- end -}}
{{- end -}}
{{- if le (len $full) 46 -}}
{{- $full | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" ($full | trunc 39 | trimSuffix "-") ($full | sha256sum | trunc 6) -}}
{{- end -}}
{{- end -}}

{{- define "agentihooks.redisName" -}}
{{- printf "%s-redis" (include "agentihooks.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agentihooks.checkpointClaim" -}}
{{- default (printf "%s-checkpoints" (include "agentihooks.fullname" .)) .Values.checkpointStore.root.persistence.existingClaim -}}
{{- end -}}

{{- define "agentihooks.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "agentihooks.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "agentihooks.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "agentihooks.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agentihooks-recovery
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of the operator Pods. */}}
{{- define "agentihooks.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentihooks.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* The operator Pods' selector labels as `key=value,...` (api/peers.py reads it). */}}
{{- define "agentihooks.selectorList" -}}
{{- $pairs := list -}}
{{- range $k, $v := (include "agentihooks.selectorLabels" . | fromYaml) -}}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* Selector labels of the embedded Redis Pod. */}}
{{- define "agentihooks.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "agentihooks.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end -}}

{{/* The operator image reference: digest wins over tag; the tag defaults to appVersion. */}}
{{- define "agentihooks.operatorImage" -}}
{{- $img := .Values.operator.image -}}
{{- $repo := include "agentihooks.registry" (list . $img.repository) -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $repo $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/* An image repository under global.imageRegistry (a mirror), when one is set. */}}
{{- define "agentihooks.registry" -}}
{{- $root := index . 0 -}}
{{- $repo := index . 1 -}}
{{- with (($root.Values.global | default dict).imageRegistry) -}}
{{- printf "%s/%s" (trimSuffix "/" .) $repo -}}
{{- else -}}
{{- $repo -}}
{{- end -}}
{{- end -}}

{{/* The Redis image (global.imageRegistry applies to it too). */}}
{{- define "agentihooks.redisImage" -}}
{{- $img := .Values.redis.embedded.image -}}
{{- printf "%s:%s" (include "agentihooks.registry" (list . $img.repository)) $img.tag -}}
{{- end -}}

{{/* Namespaces the operator watches (namespaced mode): the list, or the release namespace. */}}
{{- define "agentihooks.watchNamespaces" -}}
{{- if .Values.rbac.watchNamespaces -}}
{{- join "," (uniq .Values.rbac.watchNamespaces) -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* Redis URL the operator connects to (never with a password in it). */}}
{{- define "agentihooks.redisUrl" -}}
{{- if eq .Values.redis.mode "external" -}}
{{- .Values.redis.external.url -}}
{{- else -}}
{{- printf "redis://%s.%s.svc:6379/0" (include "agentihooks.redisName" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}
{{/*
The operator Deployment's strategy: operator.strategy when set; else Recreate when the checkpoint
store is a claim without ReadWriteMany (a surge Pod could not mount a ReadWriteOnce claim that the old
Pod holds on another node), else RollingUpdate.
*/}}
{{- define "agentihooks.strategy" -}}
{{- if .Values.operator.strategy -}}
{{- toYaml .Values.operator.strategy -}}
{{- else if and (eq .Values.checkpointStore.mode "root") (not (has "ReadWriteMany" .Values.checkpointStore.root.persistence.accessModes)) -}}
type: Recreate
{{- else -}}
type: RollingUpdate
{{- end -}}
{{- end -}}

{{/* Control API URL the workers report to. */}}
{{- define "agentihooks.controlUrl" -}}
{{- default (printf "http://%s.%s.svc:%d" (include "agentihooks.fullname" .) .Release.Namespace (int .Values.service.port)) .Values.controlApi.url -}}
{{- end -}}

{{/*
Checks across values that a JSON schema cannot express well; each failure names the value to fix.
Included once, from the operator Deployment.
*/}}
{{- define "agentihooks.validate" -}}
{{- if and (eq .Values.redis.mode "external") (not .Values.redis.external.url) -}}
{{- fail "redis.mode is external but redis.external.url is empty: set the URL of your Redis" -}}
{{- end -}}
{{- if and (eq .Values.redis.mode "external") (regexMatch "^rediss?(\\+cluster|\\+sentinel)?://[^/@]*:[^/@]*@" .Values.redis.external.url) -}}
{{- fail "redis.external.url must not carry a password: put it in the Secret named by redis.auth.existingSecret" -}}
{{- end -}}
{{- $ext := .Values.redis.external -}}
{{- if and (gt (int $ext.waitReplicas) 0) (ne .Values.redis.mode "external") -}}
{{- fail "redis.external.waitReplicas needs replicas: the embedded Redis has none (use redis.mode external with Sentinel)" -}}
{{- end -}}
{{- if and (gt (int $ext.waitReplicas) 0) (regexMatch "^rediss?\\+cluster://" $ext.url) -}}
{{- fail "redis.external.waitReplicas is not supported on a Redis Cluster: set min-replicas-to-write on its primaries" -}}
{{- end -}}
{{- if and $ext.sentinelAuth.existingSecret (not (regexMatch "^rediss?\\+sentinel://" $ext.url)) -}}
{{- fail "redis.external.sentinelAuth is for Sentinel: redis.external.url must be a redis+sentinel:// URL" -}}
{{- end -}}
{{- if and (eq .Values.checkpointStore.mode "bucket") (not .Values.checkpointStore.bucket.name) -}}
{{- fail "checkpointStore.mode is bucket but checkpointStore.bucket.name is empty" -}}
{{- end -}}
{{- if and (eq .Values.checkpointStore.mode "root") (gt (int .Values.operator.replicas) 1) (not (has "ReadWriteMany" .Values.checkpointStore.root.persistence.accessModes)) (not .Values.checkpointStore.root.persistence.existingClaim) -}}
{{- fail "checkpointStore.mode root with operator.replicas above 1 needs a ReadWriteMany claim: add ReadWriteMany to checkpointStore.root.persistence.accessModes or use a bucket" -}}
{{- end -}}
{{- if and (not .Values.rbac.clusterWide) (not .Values.rbac.allowReleaseNamespace) -}}
{{- if not .Values.rbac.watchNamespaces -}}
{{- fail (printf "rbac.watchNamespaces is empty: name the namespaces where your Swarms run. They must not include the release namespace %q, which holds the operator's ServiceAccount and the Redis password (or set rbac.clusterWide=true, or rbac.allowReleaseNamespace=true to run Swarms beside the operator)" .Release.Namespace) -}}
{{- else if has .Release.Namespace .Values.rbac.watchNamespaces -}}
{{- fail (printf "rbac.watchNamespaces includes the release namespace %q, which holds the operator's ServiceAccount and the Redis password: run Swarms in namespaces of their own (or set rbac.allowReleaseNamespace=true)" .Release.Namespace) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled .Values.networkPolicy.enabled (not .Values.serviceMonitor.prometheusNamespace) (not .Values.networkPolicy.allowedFrom) -}}
{{- fail "serviceMonitor.enabled with networkPolicy.enabled: the NetworkPolicy would block Prometheus's scrape of /metrics. Set serviceMonitor.prometheusNamespace to the namespace your Prometheus runs in (or admit it in networkPolicy.allowedFrom, or set networkPolicy.enabled=false)" -}}
{{- end -}}
{{- if and .Values.redis.external.tls.caSecret (or (ne .Values.redis.mode "external") (not (regexMatch "^rediss(\\+cluster|\\+sentinel)?://" .Values.redis.external.url))) -}}
{{- fail "redis.external.tls.caSecret is for a TLS Redis: set redis.mode external with a rediss:// (or rediss+cluster://, rediss+sentinel://) redis.external.url" -}}
{{- end -}}
{{- if eq (int .Values.operator.port) (int .Values.operator.healthPort) -}}
{{- fail "operator.healthPort must differ from operator.port: the probes have a listener of their own" -}}
{{- end -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- if and $pdb.enabled (not (kindIs "string" $pdb.minAvailable)) (ge (int $pdb.minAvailable) (int .Values.operator.replicas)) (gt (int .Values.operator.replicas) 1) -}}
{{- fail "podDisruptionBudget.minAvailable must be below operator.replicas, or no operator Pod could ever be evicted (node drains would block)" -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the Redis password: the user's, or the one the chart generates; empty without auth. */}}
{{- define "agentihooks.redisAuthSecret" -}}
{{- if .Values.redis.auth.enabled -}}
{{- if .Values.redis.auth.existingSecret -}}
{{- .Values.redis.auth.existingSecret -}}
{{- else if eq .Values.redis.mode "external" -}}
{{- fail "redis.auth.existingSecret is required with an external Redis (or set redis.auth.enabled=false)" -}}
{{- else -}}
{{- printf "%s-redis-auth" (include "agentihooks.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
`imagePullSecrets` of every Pod the chart makes: `operator.imagePullSecrets` entries may be bare names
(`regcred`) or objects as in a PodSpec (`{name: regcred}`).
*/}}
{{- define "agentihooks.imagePullSecrets" -}}
{{- with .Values.operator.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ if kindIs "map" . }}{{ .name }}{{ else }}{{ . }}{{ end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Who holds the Swarm CRD now: "absent" (not in the cluster, or no cluster to ask: `helm template`,
a GitOps render), "ours" (this release's), or "foreign" (installed from an earlier chart's crds/
folder, by hand, or kept by an uninstalled release). Helm upgrades only an object the release owns,
and checks that before any hook runs: a foreign CRD is taken over by the adopt hook
(templates/crd-adopt-hook.yaml) and rendered as the release's from the next upgrade on.
*/}}
{{- define "agentihooks.crdState" -}}
{{- $live := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "swarms.agentihooks.io" -}}
{{- if not $live -}}
absent
{{- else -}}
{{- $ann := default dict $live.metadata.annotations -}}
{{- if and (eq (get $ann "meta.helm.sh/release-name") .Release.Name) (eq (get $ann "meta.helm.sh/release-namespace") .Release.Namespace) -}}
ours
{{- else -}}
foreign
{{- end -}}
{{- end -}}
{{- end -}}

"""The worker Pod's contract: what the operator owns, what a Swarm's Pod template may set, and the
layout of a provider credential Secret.

Plain names only (no Kubernetes calls), shared by the Swarm model (:mod:`.swarm`), the CRD
(:mod:`.k8s.crd`), the Pod builders (:mod:`.k8s.pods`, :mod:`.k8s.podtemplate`) and the credential
reader (:mod:`.k8s.provider`), so the schema the API server enforces and the merge the operator does
cannot disagree.
"""

from __future__ import annotations

import re

#: Prefix of every label and annotation the operator writes.
DOMAIN = "swarm.agentihooks.io"
#: Where the launch record ConfigMap is mounted (the original's path).
LAUNCH_DIR = "/var/run/swarm/launch"
#: Where the provider credential's files (Codex ``auth.json``, ``config.toml``) are mounted.
PROVIDER_DIR = "/var/run/swarm/provider"
#: Volumes of the operator: a template may not define or mount them.
OWNED_VOLUMES = ("launch", "provider")
#: Mount paths of the operator (and everything beneath them).
OWNED_PATHS = (LAUNCH_DIR, PROVIDER_DIR)
#: Environment variables the operator sets on the worker container.
OWNED_ENV = (
    "AGENTIHOOKS_LAUNCH_RECORD",
    "AGENTIHOOKS_WORKER_TOKEN",
    "AGENTIHOOKS_CHECKPOINT_ROOT",
    "AGENTIHOOKS_PROVIDER_FILES",
)

#: The worker image's home (uid/gid 1000): everything the worker writes lives beneath it or in /tmp.
WORKER_HOME = "/home/worker"
WORKER_GID = 1000
#: Writable emptyDirs of the default Pod (its root filesystem is read-only). A template volume of the
#: same name replaces the default volume (e.g. an emptyDir with a ``sizeLimit``, or a claim), a template
#: mount at the same path replaces the default mount.
WRITABLE = {"home": WORKER_HOME, "tmp": "/tmp"}  # noqa: S108  (a Pod mount point, not a temp file)

#: The worker Pod's ``terminationGracePeriodSeconds`` when the template sets none (Kubernetes' own default
#: is 30): on a drain the worker stops its harness (at most :func:`kill_seconds`), takes its final
#: capture and reports it before the kubelet's SIGKILL. A template value replaces it.
DEFAULT_GRACE_SECONDS = 60


def kill_seconds(grace: float) -> float:
    """The harness's stop budget after SIGTERM for a Pod of ``grace`` seconds: a third of it, 1 to 10 s,
    so at least two thirds are left for the final capture and its report."""
    return float(max(1, min(10, int(grace) // 3)))


# -- the Pod template ------------------------------------------------------------------------------
#: ``podTemplate.spec`` fields a template may set (their schema is the real Kubernetes one).
POD_FIELDS = (
    "affinity",
    "automountServiceAccountToken",
    "imagePullSecrets",
    "nodeSelector",
    "priorityClassName",
    "runtimeClassName",
    "securityContext",
    "serviceAccountName",
    "terminationGracePeriodSeconds",
    "tolerations",
    "topologySpreadConstraints",
    "volumes",
)
#: ``podTemplate.spec.container`` fields (the worker container ``agent``) a template may set.
CONTAINER_FIELDS = ("env", "envFrom", "imagePullPolicy", "resources", "securityContext", "volumeMounts")
#: ``podTemplate.metadata`` fields a template may set.
METADATA_FIELDS = ("labels", "annotations")
#: Fields a template must not set: the CRD refuses them (CEL rules) with these messages; an object
#: that still carries one (stored before the rule existed, or on a server without it) gets the
#: operator's value and a Warning Event.
OWNED_METADATA = {
    "name": "the Pod's name is swarm-<execution id>",
    "generateName": "the Pod's name is swarm-<execution id>",
    "namespace": "the Pod runs in the Swarm's namespace",
    "ownerReferences": "the Pod is owned by its Swarm",
}
OWNED_POD = {
    "restartPolicy": "a worker Pod is never restarted in place (Never)",
    "containers": "the worker container is the operator's; set its fields under podTemplate.spec.container",
    "initContainers": "the worker Pod runs only the operator's container",
}
OWNED_CONTAINER = {
    "name": "the worker container is named agent",
    "image": "the image is spec.image (its tag is the compatibility key)",
    "command": "the worker's entrypoint runs the harness (spec.harness.command)",
    "args": "the worker's entrypoint runs the harness (spec.harness.command)",
}
#: Upper bounds of the template's lists and maps (they also bound the CEL rules' cost).
MAX_ENV = 256
MAX_MOUNTS = 64
MAX_VOLUMES = 64
MAX_META = 64

# -- provider credential Secrets -------------------------------------------------------------------
#: Keys of a provider credential Secret that hold the credential itself, by harness (at least one).
CREDENTIAL_KEYS = {
    "claude": ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"),
    "codex": ("OPENAI_API_KEY", "auth.json"),
}
#: Further environment keys copied when present (base URL, model, provider switches), by harness.
SETTING_KEYS = {
    "claude": re.compile(r"^(ANTHROPIC|CLAUDE_CODE)_[A-Z0-9_]+$"),
    "codex": re.compile(r"^(OPENAI|CODEX)_[A-Z0-9_]+$"),
}
#: Keys that are files, mounted under :data:`PROVIDER_DIR` (the worker copies them into the harness home).
FILE_KEYS = {"claude": (), "codex": ("auth.json", "config.toml")}
#: Every credential variable name: a template may give these only by reference, never as a value.
CREDENTIAL_ENV = tuple(sorted({k for keys in CREDENTIAL_KEYS.values() for k in keys if "." not in k}))
#: Prefix of the provider keys inside the per-execution credential Secret (``provider.<key>``).
PROVIDER_PREFIX = "provider."

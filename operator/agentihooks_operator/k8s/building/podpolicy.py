"""What a Swarm's Pod template may ask for: a Swarm author gains nothing a Pod author lacks.

The operator creates worker Pods with its own rights, so a template it copied blindly would lend them
to whoever may write a Swarm: the operator's ServiceAccount and its token, Secrets the author cannot
read, the labels the chart's NetworkPolicies admit to Redis and the control API, a privileged or
host-mounting container. The CRD refuses the static part of the rule at admission (CEL rules built
from the same constants, :mod:`.podtemplate`); this module is the operator's own check, applied to
every launch whatever admission let through (an object stored before a rule existed, a CRD applied by
hand without its rules). Each refusal names the field and the rule, never a value it read.

The rule:
- ``serviceAccountName``: unset (the namespace's ``default`` account, no token mounted), or one of the
  accounts the cluster operator allowed (``AGENTIHOOKS_WORKER_SERVICE_ACCOUNTS``); never the
  operator's own (``AGENTIHOOKS_OPERATOR_SERVICE_ACCOUNT``), even when allowed by mistake.
- ``automountServiceAccountToken`` is never true, and no projected ServiceAccount token.
- Volumes only of the kinds in :data:`VOLUME_KINDS` (no hostPath, no network filesystems).
- A Secret (volume, projected source, ``envFrom``, ``secretKeyRef``, ``imagePullSecrets``) or a claim
  (``persistentVolumeClaim``, an ``ephemeral`` volume's ``dataSource``) only when its owner lent it
  with the label ``swarm.agentihooks.io/pod-template: allowed``, or the cluster operator listed it
  (``AGENTIHOOKS_WORKER_SECRETS``, ``AGENTIHOOKS_WORKER_CLAIMS``): :mod:`.borrowing`. Creating Pods
  needs no right to read the Secrets and claims they mount, which is exactly what a Swarm-only author
  must not borrow.
- No ``app.kubernetes.io/component`` label ``operator`` or ``redis`` (the chart's selectors).
- No privileged container, privilege escalation, added capability but ``NET_BIND_SERVICE``, root
  user, ``runAsNonRoot: false`` or unconfined seccomp.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .borrowing import OPT_IN, Labels, claim_refs, clone_refusals, not_lent, pull_secret_refs

#: Volume kinds a template may use; every other kind of the Kubernetes Volume is refused.
VOLUME_KINDS = (
    "emptyDir",
    "configMap",
    "secret",
    "persistentVolumeClaim",
    "projected",
    "downwardAPI",
    "ephemeral",
)
#: Projected sources a template may use (no ``serviceAccountToken``, no ``clusterTrustBundle``).
PROJECTED_SOURCES = ("configMap", "secret", "downwardAPI")
#: The label whose value marks the chart's operator and Redis Pods, and the values reserved.
COMPONENT_LABEL = "app.kubernetes.io/component"
RESERVED_COMPONENTS = ("operator", "redis")
#: The label (and value) a Secret's owner puts on it so Swarm Pod templates may use it.
SECRET_OPT_IN = OPT_IN
#: Capabilities a container may add (the only one Pod Security ``restricted`` allows).
ADDABLE_CAPABILITIES = ("NET_BIND_SERVICE",)


@dataclass(frozen=True)
class TemplatePolicy:
    """The cluster operator's part of the rule (chart values, operator settings)."""

    service_accounts: frozenset[str] = frozenset()
    operator_account: tuple[str, str] | None = None  # (namespace, name)
    secrets: frozenset[str] = frozenset()
    #: Claims of any watched namespace a Swarm may use without the opt-in label.
    claims: frozenset[str] = frozenset()
    #: The operator's own namespace, which holds its ServiceAccount and (in the chart) the Redis
    #: password: no Swarm runs there unless ``allow_operator_namespace``.
    operator_namespace: str | None = None
    allow_operator_namespace: bool = False
    #: Namespaces where no Swarm launches Pods whatever RBAC grants (the cluster's own: kube-system, ...).
    excluded_namespaces: frozenset[str] = frozenset()

    def namespace_refusal(self, namespace: str) -> str | None:
        """Why a Swarm may not launch Pods in ``namespace``, or ``None`` when it may."""
        if namespace in self.excluded_namespaces:
            return (
                f"metadata.namespace: a Swarm may not run in {namespace!r}, which the cluster operator "
                "excluded (AGENTIHOOKS_EXCLUDED_NAMESPACES, the chart's rbac.excludeNamespaces; by default "
                "the cluster's own kube-system, kube-public and kube-node-lease): create it in a namespace "
                "of its own"
            )
        if self.allow_operator_namespace or not self.operator_namespace:
            return None
        if namespace != self.operator_namespace:
            return None
        return (
            f"metadata.namespace: a Swarm may not run in {namespace!r}, the operator's own namespace, "
            "which holds the operator's ServiceAccount and the Redis password; create it in a "
            "namespace of its own that the operator watches (or the cluster operator sets "
            "rbac.allowReleaseNamespace)"
        )

    @classmethod
    def from_settings(
        cls,
        accounts: str,
        operator_account: str,
        secrets: str,
        own_namespace: str,
        allow_own_namespace: bool = False,
        *,
        excluded: str = "",
        claims: str = "",
    ) -> TemplatePolicy:
        """From comma-separated names; ``operator_account`` is ``name`` or ``namespace/name``."""
        op: tuple[str, str] | None = None
        if operator_account.strip():
            ns, _, name = operator_account.strip().rpartition("/")
            op = (ns or own_namespace, name)
        return cls(
            service_accounts=frozenset(a.strip() for a in accounts.split(",") if a.strip()),
            operator_account=op,
            secrets=frozenset(s.strip() for s in secrets.split(",") if s.strip()),
            claims=frozenset(c.strip() for c in claims.split(",") if c.strip()),
            operator_namespace=own_namespace.strip() or None,
            allow_operator_namespace=allow_own_namespace,
            excluded_namespaces=frozenset(n.strip() for n in excluded.split(",") if n.strip()),
        )


def secret_refs(template: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(field path, Secret name)`` of every Secret the template's Pod would read."""
    spec = template.get("spec") or {}
    for v in spec.get("volumes") or []:
        if (v.get("secret") or {}).get("secretName"):
            yield f"podTemplate.spec.volumes[{v.get('name')}].secret", v["secret"]["secretName"]
        for i, src in enumerate((v.get("projected") or {}).get("sources") or []):
            if (src.get("secret") or {}).get("name"):
                yield (
                    f"podTemplate.spec.volumes[{v.get('name')}].projected.sources[{i}].secret",
                    src["secret"]["name"],
                )
    c = spec.get("container") or {}
    for i, src in enumerate(c.get("envFrom") or []):
        if (src.get("secretRef") or {}).get("name"):
            yield f"podTemplate.spec.container.envFrom[{i}].secretRef", src["secretRef"]["name"]
    for e in c.get("env") or []:
        ref = (e.get("valueFrom") or {}).get("secretKeyRef") or {}
        if ref.get("name"):
            yield f"podTemplate.spec.container.env[{e.get('name')}].valueFrom.secretKeyRef", ref["name"]


def refusals(
    template: Mapping[str, Any] | None,
    policy: TemplatePolicy,
    namespace: str,
    secret_labels: Labels,
    claim_labels: Labels | None = None,
) -> list[str]:
    """Every way ``template`` (``podTemplate`` as stored) breaks the rule, as ``field: rule`` texts.

    ``secret_labels(name)`` and ``claim_labels(name)`` give a Secret's or a claim's labels in
    ``namespace`` (None: no such object; no ``claim_labels``: no claim is lent but the listed ones).
    """
    if not template:
        return []
    out: list[str | None] = []
    spec = template.get("spec") or {}
    out += _account(spec, policy, namespace)
    for i, v in enumerate(spec.get("volumes") or []):
        kinds = [k for k in v if k != "name"]
        bad = [k for k in kinds if k not in VOLUME_KINDS]
        if bad:
            out.append(
                f"podTemplate.spec.volumes[{v.get('name', i)}]: a {bad[0]} volume is not allowed "
                f"in a Swarm (allowed: {', '.join(VOLUME_KINDS)})"
            )
        for j, src in enumerate((v.get("projected") or {}).get("sources") or []):
            odd = [k for k in src if k not in PROJECTED_SOURCES]
            if odd:
                out.append(
                    f"podTemplate.spec.volumes[{v.get('name', i)}].projected.sources[{j}]: a {odd[0]} "
                    "source is not allowed in a Swarm (worker Pods carry no Kubernetes credential)"
                )
    out += clone_refusals(template)
    for path, name in (*secret_refs(template), *pull_secret_refs(template)):
        out.append(
            not_lent(
                path,
                "Secret",
                name,
                secret_labels,
                listed=policy.secrets,
                setting="AGENTIHOOKS_WORKER_SECRETS",
            )
        )
    for path, name in claim_refs(template):
        out.append(
            not_lent(
                path,
                "PersistentVolumeClaim",
                name,
                claim_labels or _none,
                listed=policy.claims,
                setting="AGENTIHOOKS_WORKER_CLAIMS",
            )
        )
    labels = (template.get("metadata") or {}).get("labels") or {}
    if labels.get(COMPONENT_LABEL) in RESERVED_COMPONENTS:
        out.append(
            f"podTemplate.metadata.labels[{COMPONENT_LABEL}]: the values "
            f"{', '.join(RESERVED_COMPONENTS)} mark the operator's and Redis's own Pods"
        )
    out += security_refusals("podTemplate.spec.securityContext", spec.get("securityContext") or {})
    out += security_refusals(
        "podTemplate.spec.container.securityContext",
        (spec.get("container") or {}).get("securityContext") or {},
        container=True,
    )
    return [r for r in out if r is not None]


def _none(_: str) -> None:
    return None


def _account(spec: Mapping[str, Any], policy: TemplatePolicy, namespace: str) -> list[str]:
    out = []
    if spec.get("automountServiceAccountToken") is True:
        out.append(
            "podTemplate.spec.automountServiceAccountToken: a worker Pod never mounts a ServiceAccount token"
        )
    account = spec.get("serviceAccountName")
    if account:
        if policy.operator_account == (namespace, account):
            out.append("podTemplate.spec.serviceAccountName: the operator's own ServiceAccount is never lent")
        elif account not in policy.service_accounts:
            allowed = ", ".join(sorted(policy.service_accounts)) or "none"
            out.append(
                f"podTemplate.spec.serviceAccountName: {account!r} is not among the accounts the cluster "
                f"operator allows for worker Pods (AGENTIHOOKS_WORKER_SERVICE_ACCOUNTS: {allowed})"
            )
    return out


def security_refusals(path: str, sc: Mapping[str, Any], *, container: bool = False) -> list[str]:
    """What in a Pod or container ``securityContext`` grants more than Pod Security ``restricted``."""
    out = []
    if container and sc.get("privileged") is True:
        out.append(f"{path}.privileged: a worker container is never privileged")
    if container and sc.get("allowPrivilegeEscalation") is True:
        out.append(f"{path}.allowPrivilegeEscalation: a worker container may not escalate privileges")
    added = [c for c in (sc.get("capabilities") or {}).get("add") or [] if c not in ADDABLE_CAPABILITIES]
    if container and added:
        out.append(f"{path}.capabilities.add: only {', '.join(ADDABLE_CAPABILITIES)} may be added")
    if sc.get("runAsUser") == 0:
        out.append(f"{path}.runAsUser: a worker never runs as root (0)")
    if sc.get("runAsNonRoot") is False:
        out.append(f"{path}.runAsNonRoot: may not be false")
    if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append(f"{path}.seccompProfile: a worker is never unconfined")
    return out

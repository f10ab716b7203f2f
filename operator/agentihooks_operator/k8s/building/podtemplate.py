"""The Swarm's worker Pod template: its CRD schema, and its merge under the operator's own Pod.

Schema: the template's fields carry the real Kubernetes shapes, vendored from the Kubernetes OpenAPI
definitions into ``worker_pod_fields.json`` (``scripts/gen-pod-template-defs.py``), so the API server
validates a template as it would the Pod itself: a misspelt field is an unknown field (refused by
strict field validation, ``kubectl``'s default) and a wrong type is refused with its path. Fields
the operator owns are declared only to be refused by CEL rules with a message saying whose they are.

Merge (:func:`apply_template`, pure): the operator builds its Pod first; the template adds what it
may under it. The operator's name, namespace, owner reference, ``swarm.agentihooks.io/`` labels and
annotations, container name, image, command and arguments, launch-record and provider volumes and
mounts, its environment variables and ``restartPolicy`` always win: a template value that collides
with one is dropped and named in a warning (the launcher posts it as a ``PodTemplateIgnored``
Warning Event). The security defaults (Pod and container ``securityContext``,
``automountServiceAccountToken: false``) and the writable emptyDirs are defaults, not owned: a
template may change them, and the API server's Pod Security admission decides whether the namespace
allows the result.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any

from ... import worker_pod as wp
from ...swarm import PodTemplate
from . import borrowing
from . import podpolicy as pp
from . import restricted as rs

#: The CRD's schema marker value of ``spec.podTemplate`` (see :data:`~..swarm.SCHEMA_MARK`).
MARK = "podTemplate"


@functools.cache
def k8s_fields() -> dict[str, Any]:
    """The vendored Kubernetes shapes: ``{"pod": {field: schema}, "container": {field: schema}}``."""
    text = resources.files(__package__).joinpath("worker_pod_fields.json").read_text(encoding="utf-8")
    fields: dict[str, Any] = json.loads(text)
    return fields


def _quoted(names: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(f"'{n}'" for n in names) + "]"


def _forbid(owned: dict[str, str], where: str) -> list[dict[str, str]]:
    rules = []
    for name, why in owned.items():
        field = "__namespace__" if name == "namespace" else name  # a CEL keyword is escaped
        rules.append(
            {
                "rule": f"!has(self.{field})",
                "message": f"{where}.{name} is set by the operator ({why}); remove it from the template",
            }
        )
    return rules


#: The description of a field the operator owns: declared in the schema only to be refused.
OWNED = "Set by the operator; a template may not set it."


def _owned(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "description": OWNED}


def _meta_map(kind: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"{kind.capitalize()} added to the worker Pod's own (not under {wp.DOMAIN}/).",
        "maxProperties": wp.MAX_META,
        "additionalProperties": {"type": "string"},
        "x-kubernetes-validations": [
            {
                "rule": f"self.all(k, !k.startsWith('{wp.DOMAIN}/'))",
                "message": f"{kind} under {wp.DOMAIN}/ are set by the operator; use another prefix",
            },
            *(
                [
                    {
                        "rule": f"!('{pp.COMPONENT_LABEL}' in self) || "
                        f"!(self['{pp.COMPONENT_LABEL}'] in {_quoted(pp.RESERVED_COMPONENTS)})",
                        "message": f"labels[{pp.COMPONENT_LABEL}]: the values "
                        f"{', '.join(pp.RESERVED_COMPONENTS)} mark the operator's and Redis's own Pods",
                    }
                ]
                if kind == "labels"
                else []
            ),
        ],
    }


def _rule(rule: str, message: str) -> dict[str, str]:
    return {"rule": rule, "message": message}


def _escalation_rules(k8s: dict[str, Any], container: dict[str, Any]) -> None:
    """The static half of :mod:`.podpolicy`'s rule as CEL: volume kinds, projected tokens, privileges.
    (The ServiceAccount and Secret rules depend on the cluster's settings and Secrets: the operator's.)"""
    item = k8s["pod"]["volumes"]["items"]
    refused = [k for k in sorted(item["properties"]) if k != "name" and k not in pp.VOLUME_KINDS]
    item.setdefault("x-kubernetes-validations", []).append(
        _rule(
            " && ".join(f"!has(self.{k})" for k in refused),
            f"podTemplate.spec.volumes: only {', '.join(pp.VOLUME_KINDS)} volumes are allowed in a Swarm",
        )
    )
    claim = item["properties"]["ephemeral"]["properties"]["volumeClaimTemplate"]["properties"]["spec"]
    kinds = _quoted(list(borrowing.CLONE_KINDS))
    claim.setdefault("x-kubernetes-validations", []).extend(
        [
            *(
                _rule(
                    f"!has(self.{key}) || (self.{key}.kind in {kinds} && "
                    f"(!has(self.{key}.apiGroup) || self.{key}.apiGroup == ''))",
                    f"podTemplate.spec.volumes.ephemeral.volumeClaimTemplate.spec.{key}: an ephemeral volume "
                    "may be made from a PersistentVolumeClaim (one its owner lent) and nothing else",
                )
                for key in ("dataSource", "dataSourceRef")
            ),
            _rule(
                "!has(self.dataSourceRef) || !has(self.dataSourceRef.__namespace__)",
                "podTemplate.spec.volumes.ephemeral.volumeClaimTemplate.spec.dataSourceRef.namespace: "
                "a Swarm clones claims of its own namespace only",
            ),
            *(
                _rule(
                    f"!has(self.{key})",
                    f"podTemplate.spec.volumes.ephemeral.volumeClaimTemplate.spec.{key}: a Swarm's ephemeral "
                    "volume is provisioned new, never bound to an existing volume",
                )
                for key in borrowing.BINDING_FIELDS
            ),
        ]
    )
    sources = item["properties"]["projected"]["properties"]["sources"]
    sources["maxItems"] = 16
    source = sources["items"]
    odd = [k for k in sorted(source.get("properties", {})) if k not in pp.PROJECTED_SOURCES]
    source.setdefault("x-kubernetes-validations", []).append(
        _rule(
            " && ".join(f"!has(self.{k})" for k in odd) or "true",
            "podTemplate.spec.volumes.projected.sources: only configMap, secret and downwardAPI sources "
            "(a worker Pod carries no Kubernetes credential)",
        )
    )
    for where, sc in (
        ("podTemplate.spec.securityContext", k8s["pod"]["securityContext"]),
        ("podTemplate.spec.container.securityContext", container["properties"]["securityContext"]),
    ):
        rules = [
            _rule("!has(self.runAsUser) || self.runAsUser != 0", f"{where}.runAsUser: never root (0)"),
            _rule("!has(self.runAsNonRoot) || self.runAsNonRoot", f"{where}.runAsNonRoot: may not be false"),
            _rule(
                "!has(self.seccompProfile) || !has(self.seccompProfile.type) || "
                "self.seccompProfile.type != 'Unconfined'",
                f"{where}.seccompProfile: a worker is never unconfined",
            ),
        ]
        rules += _restricted_rules(where, sc, container="privileged" in sc["properties"])
        if "privileged" in sc["properties"]:
            sc["properties"]["capabilities"]["properties"]["add"]["maxItems"] = 64
            add = _quoted(list(pp.ADDABLE_CAPABILITIES))
            rules += [
                _rule("!has(self.privileged) || !self.privileged", f"{where}.privileged: never privileged"),
                _rule(
                    "!has(self.allowPrivilegeEscalation) || !self.allowPrivilegeEscalation",
                    f"{where}.allowPrivilegeEscalation: a worker may not escalate privileges",
                ),
                _rule(
                    f"!has(self.capabilities) || !has(self.capabilities.add) || "
                    f"self.capabilities.add.all(c, c in {add})",
                    f"{where}.capabilities.add: only {', '.join(pp.ADDABLE_CAPABILITIES)} may be added",
                ),
            ]
        sc.setdefault("x-kubernetes-validations", []).extend(rules)


def _restricted_rules(where: str, sc: dict[str, Any], *, container: bool) -> list[dict[str, str]]:
    """The Pod Security ``restricted`` controls a template's securityContext can break on its own
    (:mod:`.restricted` checks the whole Pod the operator would create, whatever admission let in)."""
    types = _quoted(sorted(rs.SELINUX_TYPES))
    rules = [
        _rule(
            "!has(self.appArmorProfile) || self.appArmorProfile.type != 'Unconfined'",
            f"{where}.appArmorProfile: a worker is never unconfined",
        ),
        _rule(
            f"!has(self.seLinuxOptions) || ((!has(self.seLinuxOptions.type) || self.seLinuxOptions.type in "
            f"{types}) && !has(self.seLinuxOptions.user) && !has(self.seLinuxOptions.role))",
            f"{where}.seLinuxOptions: only the container SELinux types, and no user or role",
        ),
        _rule(
            "!has(self.windowsOptions) || !has(self.windowsOptions.hostProcess) || "
            "!self.windowsOptions.hostProcess",
            f"{where}.windowsOptions.hostProcess: a worker is never a host process",
        ),
    ]
    if container:
        rules += [
            _rule(
                "!has(self.procMount) || self.procMount == 'Default'",
                f"{where}.procMount: only the Default /proc mount",
            ),
            _rule(
                "!has(self.capabilities) || !has(self.capabilities.drop) || 'ALL' in self.capabilities.drop",
                f"{where}.capabilities.drop: must include ALL when given (or leave it to the operator)",
            ),
        ]
        sc["properties"]["capabilities"]["properties"]["drop"]["maxItems"] = 64
    else:
        sysctls = sc["properties"]["sysctls"]
        sysctls["maxItems"] = 32
        rules.append(
            _rule(
                f"!has(self.sysctls) || self.sysctls.all(s, s.name in {_quoted(sorted(rs.SAFE_SYSCTLS))})",
                f"{where}.sysctls: only the safe sysctls of the restricted profile",
            )
        )
    return rules


def template_schema() -> dict[str, Any]:
    """The structural OpenAPI schema of ``spec.podTemplate``, with its CEL rules."""
    k8s = copy.deepcopy(k8s_fields())
    owned_paths = _quoted(list(wp.OWNED_PATHS))
    container: dict[str, Any] = {
        "type": "object",
        "description": "Fields of the worker container (env, envFrom, imagePullPolicy, resources, "
        "securityContext, volumeMounts), as in a Pod's container.",
        "properties": {
            **k8s["container"],
            "name": _owned({"type": "string"}),
            "image": _owned({"type": "string"}),
            "command": _owned({"type": "array", "items": {"type": "string"}}),
            "args": _owned({"type": "array", "items": {"type": "string"}}),
        },
        "x-kubernetes-validations": _forbid(wp.OWNED_CONTAINER, "podTemplate.spec.container"),
    }
    env = container["properties"]["env"]
    env["maxItems"] = wp.MAX_ENV
    env["x-kubernetes-validations"] = [
        {
            "rule": f"self.all(e, !(e.name in {_quoted(wp.OWNED_ENV)}))",
            "message": f"the operator sets {', '.join(wp.OWNED_ENV)}; remove them from the template",
        },
        {
            "rule": f"self.all(e, !(e.name in {_quoted(wp.CREDENTIAL_ENV)}) || !has(e.value))",
            "message": "a provider credential is never written into a Swarm: name its Secret in "
            "spec.harness.credentials (or use valueFrom.secretKeyRef)",
        },
    ]
    mounts = container["properties"]["volumeMounts"]
    mounts["maxItems"] = wp.MAX_MOUNTS
    mounts["x-kubernetes-validations"] = [
        {
            "rule": f"self.all(m, !(m.name in {_quoted(wp.OWNED_VOLUMES)}) && "
            f"!{owned_paths}.exists(p, m.mountPath == p || m.mountPath.startsWith(p + '/')))",
            "message": f"the operator mounts {', '.join(wp.OWNED_PATHS)} (volumes "
            f"{', '.join(wp.OWNED_VOLUMES)}); mount elsewhere",
        }
    ]
    volumes = k8s["pod"]["volumes"]
    volumes["maxItems"] = wp.MAX_VOLUMES
    volumes["x-kubernetes-validations"] = [
        {
            "rule": f"self.all(v, !(v.name in {_quoted(wp.OWNED_VOLUMES)}))",
            "message": f"the volume names {', '.join(wp.OWNED_VOLUMES)} are the operator's; rename yours",
        }
    ]
    _escalation_rules(k8s, container)
    spec: dict[str, Any] = {
        "type": "object",
        "description": "Fields of the worker Pod's spec, as in a Pod, and the worker `container`.",
        "properties": {
            **k8s["pod"],
            "container": container,
            "restartPolicy": _owned({"type": "string"}),
            "containers": _owned(
                {
                    "type": "array",
                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }
            ),
            "initContainers": _owned(
                {
                    "type": "array",
                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }
            ),
        },
        "x-kubernetes-validations": [
            *_forbid(wp.OWNED_POD, "podTemplate.spec"),
            {
                "rule": "!has(self.automountServiceAccountToken) || !self.automountServiceAccountToken",
                "message": "podTemplate.spec.automountServiceAccountToken: a worker Pod never mounts a "
                "ServiceAccount token",
            },
        ],
    }
    metadata: dict[str, Any] = {
        "type": "object",
        "description": "Labels and annotations of the worker Pod.",
        "properties": {
            "labels": _meta_map("labels"),
            "annotations": _meta_map("annotations"),
            "name": _owned({"type": "string"}),
            "generateName": _owned({"type": "string"}),
            "namespace": _owned({"type": "string"}),
            "ownerReferences": _owned(
                {
                    "type": "array",
                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }
            ),
        },
        "x-kubernetes-validations": _forbid(wp.OWNED_METADATA, "podTemplate.metadata"),
    }
    return {"type": "object", "properties": {"metadata": metadata, "spec": spec}}


# -- the merge -------------------------------------------------------------------------------------


def _under_owned_path(path: str) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in wp.OWNED_PATHS)


def apply_template(pod: dict[str, Any], template: PodTemplate | None) -> tuple[dict[str, Any], list[str]]:
    """``pod`` (the operator's, with its defaults) with ``template`` merged under it.

    Returns the new Pod and one warning per template value the operator's own value overrode (field
    paths and names only, never a value). ``pod`` is not changed.
    """
    out = copy.deepcopy(pod)
    warnings: list[str] = []
    if template is None:
        return out, warnings
    t = copy.deepcopy(template.model_dump(by_alias=True))
    _merge_metadata(out["metadata"], t.get("metadata") or {}, warnings)
    spec = t.get("spec") or {}
    _merge_spec(out["spec"], spec, warnings)
    _merge_container(out["spec"]["containers"][0], spec.get("container") or {}, warnings)
    _drop_unused_defaults(out["spec"])
    return out, warnings


def _merge_metadata(meta: dict[str, Any], tmeta: dict[str, Any], warnings: list[str]) -> None:
    for name in wp.OWNED_METADATA:
        if name in tmeta:
            warnings.append(f"podTemplate.metadata.{name} ignored: {wp.OWNED_METADATA[name]}")
    for kind in wp.METADATA_FIELDS:
        mine: dict[str, str] = meta.setdefault(kind, {})
        merged: dict[str, str] = {}
        for key, value in (tmeta.get(kind) or {}).items():
            if key.startswith(wp.DOMAIN + "/") or key in mine:
                warnings.append(
                    f"podTemplate.metadata.{kind}[{key}] ignored: {wp.DOMAIN}/ {kind} are the operator's"
                )
                continue
            merged[key] = value
        meta[kind] = {**merged, **mine}


def _merge_spec(spec: dict[str, Any], tspec: dict[str, Any], warnings: list[str]) -> None:
    for name in wp.OWNED_POD:
        if name in tspec:
            warnings.append(f"podTemplate.spec.{name} ignored: {wp.OWNED_POD[name]}")
    for name in wp.POD_FIELDS:
        if name not in tspec or name in {"securityContext", "volumes"}:
            continue
        spec[name] = tspec[name]
    if "securityContext" in tspec:
        spec["securityContext"] = {**spec.get("securityContext", {}), **(tspec["securityContext"] or {})}
    volumes: list[dict[str, Any]] = list(spec.get("volumes", []))
    for volume in tspec.get("volumes") or []:
        name = volume.get("name")
        if name in wp.OWNED_VOLUMES:
            warnings.append(f"podTemplate.spec.volumes[{name}] ignored: the volume name is the operator's")
            continue
        if name in wp.WRITABLE:  # replaces a default writable volume
            volumes = [v for v in volumes if v.get("name") != name]
        volumes.append(volume)
    spec["volumes"] = volumes


def _merge_container(container: dict[str, Any], tc: dict[str, Any], warnings: list[str]) -> None:
    for name in wp.OWNED_CONTAINER:
        if name in tc:
            warnings.append(f"podTemplate.spec.container.{name} ignored: {wp.OWNED_CONTAINER[name]}")
    for name in ("resources", "envFrom", "imagePullPolicy"):
        if name in tc:
            container[name] = tc[name]
    if "securityContext" in tc:
        mine = container.get("securityContext", {})
        theirs = dict(tc["securityContext"] or {})
        caps = theirs.get("capabilities")
        if isinstance(caps, dict) and "drop" not in caps:  # adding one keeps the operator's drop of ALL
            theirs["capabilities"] = {**caps, "drop": list((mine.get("capabilities") or {}).get("drop", []))}
        container["securityContext"] = {**mine, **theirs}
    env: list[dict[str, Any]] = list(container.get("env", []))
    mine = {e["name"] for e in env}
    for item in tc.get("env") or []:
        name = item.get("name")
        if name in mine or name in wp.OWNED_ENV:
            warnings.append(f"podTemplate.spec.container.env[{name}] ignored: the operator sets it")
            continue
        env.append(item)
    container["env"] = env
    mounts: list[dict[str, Any]] = list(container.get("volumeMounts", []))
    for mount in tc.get("volumeMounts") or []:
        name, path = mount.get("name"), str(mount.get("mountPath", ""))
        if name in wp.OWNED_VOLUMES or _under_owned_path(path):
            warnings.append(
                f"podTemplate.spec.container.volumeMounts[{path}] ignored: the operator mounts "
                f"{', '.join(wp.OWNED_PATHS)}"
            )
            continue
        defaults = {p.rstrip("/") for p in wp.WRITABLE.values()}
        if path.rstrip("/") in defaults:  # replaces a default writable mount
            mounts = [m for m in mounts if m.get("mountPath", "").rstrip("/") != path.rstrip("/")]
        mounts.append(mount)
    container["volumeMounts"] = mounts


def _drop_unused_defaults(spec: dict[str, Any]) -> None:
    """A default writable volume that no mount uses any more (a template mount took its path) goes."""
    used = {m.get("name") for c in spec.get("containers", []) for m in c.get("volumeMounts", [])}
    spec["volumes"] = [
        v for v in spec.get("volumes", []) if v.get("name") in used or v.get("name") not in wp.WRITABLE
    ]

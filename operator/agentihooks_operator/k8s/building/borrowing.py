"""What a Swarm may borrow from its namespace: data and credentials only their owner lent it.

The operator reads and mounts objects of the Swarm's namespace with its own rights, so whoever may
write a Swarm could otherwise reach every claim and Secret there: mount a PersistentVolumeClaim or
clone one into an ``ephemeral`` volume (``dataSource``), run on the checkpoint store's claim, pull
with any registry Secret, or have a provider key copied into a Pod running an image they chose. None
of that needs a right to read claims or Secrets, which is exactly what a Swarm-only author must not
borrow. So each such object must be lent: its owner labels it ``swarm.agentihooks.io/pod-template:
allowed`` (:data:`OPT_IN`), or the cluster operator lists it (``AGENTIHOOKS_WORKER_SECRETS``,
``AGENTIHOOKS_WORKER_CLAIMS``). Only the static part (an ``ephemeral`` volume may clone a claim and
nothing else) can be refused at admission; the labels are the operator's to read, before every
launch. Each refusal names the field, the object and the rule, never a value read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ... import worker_pod as wp

#: The label (and value) an owner puts on a Secret or a claim so Swarms of its namespace may use it.
OPT_IN = (f"{wp.DOMAIN}/pod-template", "allowed")
#: What an ``ephemeral`` volume may be made from: a claim (checked like a mounted one), nothing else
#: (a VolumeSnapshot or a populator's object would need rights the operator does not hold to check).
CLONE_KINDS = ("PersistentVolumeClaim",)
#: Fields of an ``ephemeral`` claim that bind it to a volume that exists already (and its data).
BINDING_FIELDS = ("volumeName", "selector")

#: ``labels(name)`` of an object in the Swarm's namespace; ``None`` when there is no such object.
Labels = Callable[[str], Mapping[str, str] | None]


def claim_refs(template: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(field path, claim name)`` of every claim a template's Pod would mount or clone."""
    for v in (template.get("spec") or {}).get("volumes") or []:
        where = f"podTemplate.spec.volumes[{v.get('name')}]"
        claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            yield f"{where}.persistentVolumeClaim", claim
        for key, source in _clone_sources(v):
            if _is_claim(source) and source.get("name"):
                yield f"{where}.ephemeral.volumeClaimTemplate.spec.{key}", source["name"]


def clone_refusals(template: Mapping[str, Any] | None) -> list[str]:
    """The static rule: an ``ephemeral`` volume may be made from a claim of the namespace only, and
    binds no existing volume (``volumeName``, ``selector``: a released volume still holds its data)."""
    out = []
    for v in ((template or {}).get("spec") or {}).get("volumes") or []:
        claim = ((v.get("ephemeral") or {}).get("volumeClaimTemplate") or {}).get("spec") or {}
        out += [
            f"podTemplate.spec.volumes[{v.get('name')}].ephemeral.volumeClaimTemplate.spec.{key}: a Swarm's "
            "ephemeral volume is provisioned new, never bound to an existing volume"
            for key in BINDING_FIELDS
            if claim.get(key)
        ]
        for key, source in _clone_sources(v):
            if not _is_claim(source):
                kind = source.get("kind") or "an object"
                out.append(
                    f"podTemplate.spec.volumes[{v.get('name')}].ephemeral.volumeClaimTemplate.spec.{key}: "
                    f"a volume made from a {kind} is not allowed in a Swarm (only from a "
                    "PersistentVolumeClaim its owner lent, like a mounted one)"
                )
            elif source.get("namespace"):
                out.append(
                    f"podTemplate.spec.volumes[{v.get('name')}].ephemeral.volumeClaimTemplate.spec.{key}"
                    ".namespace: a Swarm clones claims of its own namespace only"
                )
    return out


def pull_secret_refs(template: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(field path, Secret name)`` of the template's ``imagePullSecrets``."""
    for i, ref in enumerate((template.get("spec") or {}).get("imagePullSecrets") or []):
        if ref.get("name"):
            yield f"podTemplate.spec.imagePullSecrets[{i}]", ref["name"]


def not_lent(
    path: str, kind: str, name: str, labels: Labels, *, listed: frozenset[str], setting: str
) -> str | None:
    """Why ``name`` (a ``kind`` of the Swarm's namespace, at ``path``) may not be used, or ``None``."""
    if name in listed:
        return None
    found = labels(name)
    key, value = OPT_IN
    if found is not None and found.get(key) == value:
        return None
    # A missing object reads as one not lent: a Swarm author learns nothing of what the namespace holds.
    return (
        f"{path}: {kind} {name!r} may be used by a Swarm only when it carries the label "
        f"{key}={value} (or the cluster operator lists it in {setting})"
    )


def checkpoint_claim_refusal(claim: str | None, labels: Labels, listed: frozenset[str]) -> str | None:
    """The checkpoint store's claim is mounted into every worker Pod: lent like any other claim."""
    if not claim:
        return None
    return not_lent(
        "checkpointStore.claim",
        "PersistentVolumeClaim",
        claim,
        labels,
        listed=listed,
        setting="AGENTIHOOKS_WORKER_CLAIMS",
    )


def provider_refusal(path: str, secret: str, labels: Mapping[str, str], listed: frozenset[str]) -> str | None:
    """A provider Secret (read already, ``labels`` its own) is copied into a Pod whose image the author
    chose: lent like any Secret a template mounts."""
    return not_lent(
        path, "Secret", secret, lambda _: labels, listed=listed, setting="AGENTIHOOKS_WORKER_SECRETS"
    )


def _clone_sources(volume: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    spec = (((volume.get("ephemeral") or {}).get("volumeClaimTemplate") or {}).get("spec")) or {}
    for key in ("dataSource", "dataSourceRef"):
        if isinstance(spec.get(key), Mapping):
            yield key, spec[key]


def _is_claim(source: Mapping[str, Any]) -> bool:
    return source.get("kind") in CLONE_KINDS and not source.get("apiGroup")

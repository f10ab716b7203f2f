"""Provider credentials: read a seat's credential Secret and pick the keys its harness uses.

A Swarm names, for every seat (``seats[].credentials``, else ``harness.credentials``), a Secret in its
namespace holding the provider account's credential under the harness's own names
(:data:`~..worker_pod.CREDENTIAL_KEYS`, :data:`~..worker_pod.SETTING_KEYS`,
:data:`~..worker_pod.FILE_KEYS`). Before an attempt's Pod is created the launcher reads that Secret:
it must exist and hold at least one credential key with a value, or nothing of the attempt is
created and the seat's card says why.

The recognised keys are copied, still base64-encoded as the API server returned them (never
decoded, never logged), into the attempt's own credential Secret under ``provider.<key>``; the Pod
takes them from there by ``secretKeyRef`` (variables) and a Secret volume (files). Fencing the
attempt deletes that Secret with its Pod, so a fenced attempt can no longer be given the provider
credential through this product (a container that already started keeps the environment it was
started with: rotate the provider key when that matters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ... import worker_pod as wp
from ..client import KubeClient, describe_refusal
from ..errors import ApiError
from .borrowing import provider_refusal


class ProviderCredentialError(Exception):
    """The credential Secret is missing, unreadable or unusable; the message names it, never its content."""


@dataclass(frozen=True)
class ProviderCredential:
    """What an attempt takes from its provider credential Secret."""

    #: The Secret it was read from (in the Swarm's namespace).
    secret: str
    #: Environment variables the Pod sets from the attempt's Secret.
    env: tuple[str, ...]
    #: Files mounted under :data:`~..worker_pod.PROVIDER_DIR`.
    files: tuple[str, ...]
    #: ``provider.<key>`` → the base64 value, as it goes into the attempt's Secret ``data``.
    data: Mapping[str, str] = field(repr=False, compare=False)

    @staticmethod
    def key(name: str) -> str:
        """The key of ``name`` (a variable or file name) in the attempt's credential Secret."""
        return wp.PROVIDER_PREFIX + name


def select(harness: str, secret: str, obj: Mapping[str, Any]) -> ProviderCredential:
    """The keys of Secret ``obj`` that ``harness`` uses; raises :class:`ProviderCredentialError`."""
    data: Mapping[str, Any] = obj.get("data") or {}
    credentials = wp.CREDENTIAL_KEYS[harness]
    files = wp.FILE_KEYS[harness]
    settings = wp.SETTING_KEYS[harness]
    empty = sorted(k for k in credentials if k in data and not data[k])
    usable = [k for k in credentials if data.get(k)]
    if not usable:
        listed = ", ".join(credentials)
        detail = f" ({', '.join(empty)} empty)" if empty else ""
        raise ProviderCredentialError(
            f'provider credential Secret "{secret}" has no usable credential key{detail}: '
            f"the {harness} harness needs one of {listed}"
        )
    env = sorted(k for k in data if data[k] and "." not in k and (k in credentials or settings.match(k)))
    mounted = sorted(k for k in files if data.get(k))
    copied = {ProviderCredential.key(k): str(data[k]) for k in (*env, *mounted)}
    return ProviderCredential(secret=secret, env=tuple(env), files=tuple(mounted), data=copied)


def read(
    kube: KubeClient,
    namespace: str,
    secret: str,
    harness: str,
    *,
    path: str = "harness.credentials",
    listed: frozenset[str] = frozenset(),
) -> ProviderCredential:
    """Read Secret ``secret`` and :func:`select` from it, once its owner lent it to Swarms (the opt-in
    label, or ``listed`` by the cluster operator: :mod:`.borrowing`); every failure is a
    :class:`ProviderCredentialError` whose message says what to fix, except API errors that a retry
    may cure (5xx, unreachable), which stay :class:`ApiError`."""
    try:
        obj = kube.get("secrets", namespace, secret)
    except ApiError as e:
        if e.status in (401, 403):
            raise ProviderCredentialError(
                f'provider credential Secret "{secret}" cannot be read: {describe_refusal(e)}'
            ) from e
        raise
    if obj is None:
        raise ProviderCredentialError(
            f'provider credential Secret "{secret}" does not exist in namespace "{namespace}"'
        )
    refused = provider_refusal(path, secret, (obj.get("metadata") or {}).get("labels") or {}, listed)
    if refused is not None:
        raise ProviderCredentialError(refused)
    return select(harness, secret, obj)

"""A real Kubernetes control plane on loopback for the tests: etcd, kube-apiserver, kube-controller-manager.

The processes, their PKI and the kubeconfigs live in the demo's
:mod:`agentihooks_demo.controlplane` (``make demo DEMO_ARGS=--control-plane``
and ``make evidence`` run the same control plane); this module re-exports
them under the names the tests use, and adds what only a test does: skip (or
fail under CI) when the binaries are missing, and start the control plane
with test-speed node lifecycle settings.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentihooks_demo.controlplane import (
    AUDIT_POLICY,
    BINARIES,
    ISSUER,
    ROOT,
    SCRIPT,
    ControlPlane,
    free_port,
    locate_binaries,
    write_kubeconfig,
)
from agentihooks_demo.controlplane import control_plane as _control_plane

from .pki import Authority, Pair, service_account_keys

__all__ = [
    "AUDIT_POLICY",
    "BINARIES",
    "ISSUER",
    "ROOT",
    "SCRIPT",
    "Authority",
    "ControlPlane",
    "Pair",
    "control_plane",
    "find_binaries",
    "free_port",
    "service_account_keys",
    "write_kubeconfig",
]


def find_binaries() -> Path:
    """The folder with the three binaries, or skip (fail under CI) saying how to get them."""
    folder = locate_binaries()
    if folder is not None:
        return folder
    reason = "no control-plane binaries: run scripts/control-plane.sh (or set KUBEBUILDER_ASSETS)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@contextlib.contextmanager
def control_plane(workdir: Path) -> Iterator[ControlPlane]:
    """The control plane (test-speed node lifecycle) in ``workdir``; stopped and its etcd data removed.
    It advertises the real node's address, so Pods on that node reach it through the ``kubernetes``
    Service (the node relays that address to the loopback API server while it is up)."""
    from .realnode import NODE_IP

    with _control_plane(workdir, find_binaries(), advertise=NODE_IP) as plane:
        yield plane

"""Certificates and keys for the test control plane (the demo's :mod:`agentihooks_demo.pki`, one source)."""

from __future__ import annotations

from agentihooks_demo.pki import Authority, Pair, service_account_keys

__all__ = ["Authority", "Pair", "service_account_keys"]

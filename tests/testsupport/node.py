"""A simulated kubelet against the real API server: a Node, its Lease, bindings and Pod statuses.

:class:`RealKubelet` registers a Node and renews its Lease, binds Pods with
the ``binding`` subresource, writes container states through
``pods/<name>/status`` and finishes graceful deletions; when it stops
renewing, the real node lifecycle controller takes over. It lives in the
demo's :mod:`agentihooks_demo.node` (the demo's kubelet uses it on the real
control plane too); this module re-exports it under the names the tests use.
Status documents come from :mod:`testsupport.kubelet`.
"""

from __future__ import annotations

from agentihooks_demo.node import LEASES, MERGE, RealKubelet, _now, keep_node_alive
from agentihooks_demo.node import named_after as _named_after

__all__ = ["LEASES", "MERGE", "RealKubelet", "_named_after", "_now", "keep_node_alive"]

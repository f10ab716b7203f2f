"""The embedded demo and the live evidence run: the whole product on one machine, no cluster.

It lives in its own source root (``demo/``) because it starts both sides — the
operator process and real worker processes — and the operator and worker
packages must never import each other. It talks to them only as processes,
over HTTP and through Redis, the way a cluster would.
"""

"""Who may call the control API, how much, and which replica answers.

Bearer tokens checked as sha256 digests in constant time before any lookup, per-credential fair
shares, and the forwarding of a request that needs a swarm's lease to the replica holding it (only to
a live operator Pod's own address, with a signed assertion in place of the caller's credential).
"""

"""The recovery core's Redis side: key names, the guarded Lua scripts and who runs them, records, reads.

Everything here knows how one swarm's recovery state is laid out in Redis and how it is written
(every write a script under the lease's fencing token, acknowledged once replicated) and read (in
batched pipelines). The steps of a recovery (:mod:`..steps`) and the facade use it; it uses none of
them.
"""

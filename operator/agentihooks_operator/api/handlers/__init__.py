"""The control API's route handlers, one module per group of routes, all listed in :mod:`..routes`.

Decisions, held recoveries, relaunches, workers' reports, the scoped checkpoint store (with its pure
rules) and per-swarm reads and controls; plus the credential-free health, metrics and OpenAPI routes.
"""

"""The controller side: kopf handlers, the Recovery core, the control API, the ledger page and the CLI.

Lives under the ``operator/`` source root, which is never a package itself
(``operator`` is a standard-library module name).
"""

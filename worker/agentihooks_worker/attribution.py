"""Which attempt sent a model request: the harness names its attempt to the model API.

With one live agent per seat promised, the place that can show it is the model
API: every request of an attempt carries ``X-Agentihooks-Execution: <execution
id>``. A model gateway or proxy can then attribute spend and requests to
attempts, and a test's loopback model API checks that no fenced attempt spoke
after its replacement did. The id is an opaque identifier, never a credential.

* Claude Code adds the headers listed in ``ANTHROPIC_CUSTOM_HEADERS`` (one
  ``Name: value`` per line): the worker appends its line to any the Pod sets.
* Codex sends a header from an environment variable when its model provider
  says so (``env_http_headers = { "X-Agentihooks-Execution" =
  "AGENTIHOOKS_EXECUTION_ID" }`` in ``config.toml``): the worker sets the
  variable; the provider configuration is the user's.
"""

from __future__ import annotations

HEADER = "X-Agentihooks-Execution"
#: The variable the harness reads the id from (Codex's ``env_http_headers`` names it).
ENV = "AGENTIHOOKS_EXECUTION_ID"
CLAUDE_HEADERS = "ANTHROPIC_CUSTOM_HEADERS"


def attributed(env: dict[str, str], execution_id: str) -> dict[str, str]:
    """``env`` with the attempt named for the harness's model requests (a line set before is replaced)."""
    out = dict(env)
    out[ENV] = execution_id
    kept = [
        line
        for line in out.get(CLAUDE_HEADERS, "").splitlines()
        if line.strip() and line.split(":", 1)[0].strip().lower() != HEADER.lower()
    ]
    out[CLAUDE_HEADERS] = "\n".join([*kept, f"{HEADER}: {execution_id}"])
    return out

"""Settings of the ledger page, read from ``AGENTIHOOKS_LEDGER_*`` variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class LedgerConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTIHOOKS_LEDGER_", extra="ignore", frozen=True)

    #: How often an open page reads the ledger again (seconds).
    poll_seconds: float = Field(default=2.0, ge=0.2, le=600)

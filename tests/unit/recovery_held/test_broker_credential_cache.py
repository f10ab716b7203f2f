"""A broker credential that could not be read yet is read again on the next use, not cached away."""

from __future__ import annotations

from agentihooks_operator.recovery import HttpBrokers
from agentihooks_operator.swarm import AccountBrokerSpec


def test_missing_credential_is_read_again_and_a_found_one_is_kept() -> None:
    answers = [None, "tok-1", "tok-2"]
    reads: list[str] = []

    def read(name: str) -> str | None:
        reads.append(name)
        return answers[len(reads) - 1]

    brokers = HttpBrokers(read)
    spec = AccountBrokerSpec(url="http://127.0.0.1:9", credential_secret="broker-cred")
    first = brokers(spec)
    second = brokers(spec)
    third = brokers(spec)
    assert reads == ["broker-cred", "broker-cred"]
    assert first is not second and second is third


def test_a_broker_without_a_credential_secret_is_built_once() -> None:
    brokers = HttpBrokers(lambda name: None)
    spec = AccountBrokerSpec(url="http://127.0.0.1:9")
    assert brokers(spec) is brokers(spec)

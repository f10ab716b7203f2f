"""The address registry's pure parts: which stored entry is a usable, fresh address, and which
``AGENTIHOOKS_API_ADVERTISE_URL`` values are accepted."""

from __future__ import annotations

import json

import pytest
from agentihooks_operator.api.access.endpoints import STALE_MS, endpoints_key, fresh_url
from agentihooks_operator.api.config import ApiConfig
from pydantic import ValidationError

NOW = 1_800_000_000_000


def entry(url: object = "http://10.0.0.7:8080", at: object = NOW) -> str:
    return json.dumps({"url": url, "at": at})


def test_a_fresh_entry_gives_its_address() -> None:
    assert fresh_url(entry(), NOW) == "http://10.0.0.7:8080"
    assert fresh_url(entry(at=NOW - STALE_MS).encode(), NOW) == "http://10.0.0.7:8080"


@pytest.mark.parametrize(
    "raw",
    [
        None,
        entry(at=NOW - STALE_MS - 1),  # stale
        entry(at=NOW + 1),  # from the future: not trusted
        entry(url=""),
        entry(url=7),
        entry(url="file:///etc/passwd"),
        entry(at="now"),
        entry(at=True),
        "not json",
        "[1, 2]",
        json.dumps({"url": "http://x:1"}),
    ],
)
def test_no_address_from_a_missing_stale_or_unreadable_entry(raw: str | None) -> None:
    assert fresh_url(raw, NOW) is None


def test_the_key_has_one_hash_tag() -> None:
    assert endpoints_key("agentihooks") == "agentihooks:{agentihooks-api}:endpoints"


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("http://10.1.2.3:8080", "http://10.1.2.3:8080"),
        ("https://api-0.example:8443/", "https://api-0.example:8443"),
        ("http://[fd00::5]:8080", "http://[fd00::5]:8080"),
        ("http://fd00::5:8080", "http://[fd00::5]:8080"),  # the chart's $(POD_IP) on IPv6
        ("", None),
    ],
)
def test_an_advertise_url_is_an_origin(given: str, kept: str | None) -> None:
    assert ApiConfig(api_advertise_url=given).api_advertise_url == kept


@pytest.mark.parametrize(
    "bad",
    [
        "10.1.2.3:8080",
        "ftp://10.1.2.3:8080",
        "http://10.1.2.3",
        "http://user:pw@10.1.2.3:8080",
        "http://10.1.2.3:8080/api",
        "http://10.1.2.3:8080?x=1",
        "http://10.1.2.3:99999",
    ],
)
def test_a_bad_advertise_url_is_refused_naming_the_setting(bad: str) -> None:
    with pytest.raises(ValidationError, match="AGENTIHOOKS_API_ADVERTISE_URL"):
        ApiConfig(api_advertise_url=bad)


@pytest.mark.parametrize(
    "url",
    ["http://10.0.0.7:8080", "https://10.0.0.7:8443/", "http://[fd00::7]:8080", "http://127.0.0.1:9000"],
)
def test_plain_ip_and_port_addresses_are_taken(url: str) -> None:
    from agentihooks_operator.api.access.endpoints import plain_address

    assert plain_address(url) == url
    assert fresh_url(json.dumps({"url": url, "at": NOW}), NOW) == url


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254:80",  # the cloud metadata service
        "http://[fe80::1]:8080",
        "http://10.0.0.7:8080/prefix",
        "http://10.0.0.7:8080/?x=1",
        "http://10.0.0.7:8080#frag",
        "http://10.0.0.7",  # no port
        "http://user:pw@10.0.0.7:8080",
        "http://api.example.com:8080",  # a name, not an IP
        "ftp://10.0.0.7:21",
        "http://0.0.0.0:8080",
        "http://224.0.0.1:8080",
        "http://[::ffff:169.254.169.254]:80",
        "http://10.0.0.7:99999",
    ],
)
def test_anything_but_a_plain_address_is_never_taken(url: str) -> None:
    from agentihooks_operator.api.access.endpoints import plain_address

    assert plain_address(url) is None
    assert fresh_url(json.dumps({"url": url, "at": NOW}), NOW) is None

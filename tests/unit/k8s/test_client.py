"""The operator's Kubernetes client without a server: retry policy, Retry-After, error messages, verbs.

The calls themselves (real HTTP, TLS, token files, kmock) are in
``tests/integration/operator/test_kube_client.py``; here ``_send`` is
replaced, so what is checked is the retry loop's decisions and its waits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from agentihooks_operator.k8s.client import (
    KubeClient,
    Retries,
    api_error,
    retry_after_seconds,
    verb_of,
)
from agentihooks_operator.k8s.errors import ApiError
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ProtocolError, ReadTimeoutError

FORBIDDEN = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": 'pods is forbidden: User "system:serviceaccount:team-a:op" cannot create resource "pods" '
    'in API group "" in the namespace "team-a"',
    "reason": "Forbidden",
    "details": {"kind": "pods"},
    "code": 403,
}


class Scripted:
    """Answers ``_send`` from a list: ``(status, headers, body)`` or an exception to raise."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers: Iterator[Any] = iter(answers)
        self.sent = 0

    def __call__(self, *_: Any) -> tuple[int, dict[str, str], bytes, str]:
        self.sent += 1
        answer = next(self.answers)
        if isinstance(answer, BaseException):
            raise answer
        status, headers, body = answer
        return status, headers, json.dumps(body).encode(), "phrase"


def client(answers: list[Any], retries: Retries | None = None) -> tuple[KubeClient, Scripted, list[float]]:
    """A client whose sleeps are recorded and advance its clock instead of passing time."""
    slept: list[float] = []
    kube = KubeClient(
        "http://127.0.0.1:1", token="t", retries=retries, sleep=slept.append, clock=lambda: sum(slept)
    )
    script = Scripted(answers)
    kube._send = script  # type: ignore[method-assign]
    return kube, script, slept


def test_throttled_call_waits_what_retry_after_says_then_succeeds() -> None:
    kube, script, slept = client([(429, {"Retry-After": "2"}, {}), (200, {}, {"metadata": {"name": "a"}})])
    assert kube.get("pods", "ns", "a") == {"metadata": {"name": "a"}}
    assert script.sent == 2 and slept == [2.0]


def test_retry_after_is_capped() -> None:
    kube, _, slept = client([(429, {"retry-after": "3600"}, {}), (200, {}, {})])
    kube.get("pods", "ns", "a")
    assert slept == [Retries().retry_after_cap]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_are_retried_with_growing_jittered_waits(status: int) -> None:
    retries = Retries(tries=5, base_delay=0.2, max_delay=10, budget=60)
    kube, script, slept = client([(status, {}, {})] * 3 + [(200, {}, {"ok": True})], retries)
    assert kube.create("pods", "ns", {"metadata": {"name": "p"}}) == {"ok": True}
    assert script.sent == 4 and len(slept) == 3
    for n, wait in enumerate(slept, start=1):
        ceiling = 0.2 * 2 ** (n - 1)
        assert ceiling / 2 <= wait <= ceiling


def test_retries_stop_after_the_last_try_with_the_last_answer() -> None:
    kube, script, slept = client([(503, {}, {"reason": "ServiceUnavailable"})] * 5, Retries(base_delay=0.01))
    with pytest.raises(ApiError) as err:
        kube.patch("pods", "ns", "p", {"metadata": {}})
    assert err.value.status == 503 and script.sent == 5 and len(slept) == 4


def test_retries_stop_when_the_budget_is_spent() -> None:
    retries = Retries(tries=10, retry_after_cap=5, budget=10)
    kube, script, slept = client([(429, {"Retry-After": "4"}, {})] * 10, retries)
    with pytest.raises(ApiError) as err:
        kube.list("pods", "ns")
    assert err.value.status == 429
    assert slept == [4.0, 4.0] and script.sent == 3  # a third wait would end past 10 s


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 422])
def test_other_client_errors_are_not_retried(status: int) -> None:
    kube, script, slept = client([(status, {"Retry-After": "1"}, {"reason": "X"})] * 2)
    with pytest.raises(ApiError) as err:
        kube._call("POST", "/api/v1/namespaces/ns/pods", body={})
    assert err.value.status == status and script.sent == 1 and slept == []


def test_connection_errors_are_retried_then_reported_as_status_0() -> None:
    refused = NewConnectionError(None, "Connection refused")  # type: ignore[arg-type]
    kube, script, slept = client([refused, (200, {}, {"items": []})], Retries(base_delay=0.01))
    assert kube.list("pods", "ns") == []
    assert script.sent == 2 and len(slept) == 1
    kube, script, _ = client([refused] * 5, Retries(base_delay=0.01))
    with pytest.raises(ApiError) as err:
        kube.get("pods", "ns", "a")
    assert err.value.status == 0 and "transport error" in str(err.value) and script.sent == 5


REFUSED = NewConnectionError(None, "Connection refused")  # type: ignore[arg-type]
#: Failures after which the create may have taken effect: the request left, its answer did not come.
AFTER_SENDING = [
    ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")),
    ReadTimeoutError(None, "/api/v1/namespaces/ns/pods", "Read timed out."),  # type: ignore[arg-type]
    (500, {}, {"reason": "InternalError"}),
    (504, {}, {"reason": "Timeout"}),
]


@pytest.mark.parametrize(
    "failures",
    [
        [REFUSED] * 5,
        [ConnectTimeoutError("connect timed out")] * 5,
        [ConnectionRefusedError(111, "Connection refused")] * 5,
        [(429, {"Retry-After": "0"}, {"reason": "TooManyRequests"}), *[REFUSED] * 4],
        [REFUSED, (403, {}, FORBIDDEN)],
    ],
    ids=["refused", "connect-timeout", "os-refused", "throttled-then-refused", "refused-then-forbidden"],
)
def test_a_call_no_try_of_which_reached_the_server_is_known_not_applied(failures: list[Any]) -> None:
    kube, script, _ = client(failures, Retries(base_delay=0.01))
    with pytest.raises(ApiError) as err:
        kube.create("pods", "ns", {"metadata": {"name": "p"}})
    assert err.value.maybe_applied is False, err.value
    assert script.sent == len(failures)


@pytest.mark.parametrize("first", AFTER_SENDING, ids=["reset", "read-timeout", "500", "504"])
def test_a_call_one_try_of_which_may_have_reached_the_server_may_have_been_applied(first: Any) -> None:
    """One such try is enough, even when every later try was refused before connecting."""
    kube, _, _ = client([first, *[REFUSED] * 4], Retries(base_delay=0.01))
    with pytest.raises(ApiError) as err:
        kube.create("pods", "ns", {"metadata": {"name": "p"}})
    assert err.value.maybe_applied is True, err.value


def test_404_is_a_fact_for_get_and_delete() -> None:
    kube, _, _ = client([(404, {}, {"reason": "NotFound"})] * 2)
    assert kube.get("pods", "ns", "gone") is None
    assert kube.delete("pods", "ns", "gone") is False


def test_forbidden_keeps_the_api_servers_message_naming_verb_and_resource() -> None:
    kube, script, _ = client([(403, {}, FORBIDDEN)])
    with pytest.raises(ApiError) as err:
        kube.create("pods", "team-a", {"metadata": {"name": "p"}})
    e = err.value
    assert (e.status, e.reason, script.sent) == (403, "Forbidden", 1)
    assert 'cannot create resource "pods"' in e.message and '"team-a"' in str(e)
    assert str(e).startswith("POST /api/v1/namespaces/team-a/pods failed: 403 Forbidden: pods is forbidden")


def test_forbidden_without_a_status_body_still_names_verb_and_path() -> None:
    e = api_error(403, "GET", "/api/v1/namespaces/x/secrets/s", b"<html>denied</html>", "Forbidden")
    assert e.message == "forbidden: cannot get /api/v1/namespaces/x/secrets/s"
    assert api_error(409, "POST", "/p", b"", "Conflict").message == ""


@pytest.mark.parametrize(
    ("method", "path", "verb"),
    [
        ("GET", "/api/v1/namespaces/n/pods", "list"),
        ("GET", "/api/v1/namespaces/n/pods/p", "get"),
        ("GET", "/api/v1/nodes", "list"),
        ("GET", "/api/v1/nodes/n1", "get"),
        ("GET", "/apis/agentihooks.io/v1alpha1/namespaces/n/swarms", "list"),
        ("GET", "/apis/agentihooks.io/v1alpha1/namespaces/n/swarms/s", "get"),
        ("POST", "/api/v1/namespaces/n/events", "create"),
        ("PATCH", "/apis/agentihooks.io/v1alpha1/namespaces/n/swarms/s/status", "patch"),
        ("DELETE", "/api/v1/namespaces/n/secrets/s", "delete"),
    ],
)
def test_verb_of_a_generic_path(method: str, path: str, verb: str) -> None:
    assert verb_of(method, path) == verb


def test_retry_after_seconds_or_http_date() -> None:
    now = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("1") == 1.0
    assert retry_after_seconds(" 0.5 ") == 0.5
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=7), usegmt=True), now=now) == 7.0
    assert retry_after_seconds(format_datetime(now - timedelta(seconds=7), usegmt=True), now=now) == 0.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None


def test_default_policy_is_bounded() -> None:
    r = Retries()
    worst = sum(min(r.max_delay, r.base_delay * 2 ** (n - 1)) for n in range(1, r.tries))
    assert r.tries == 5 and worst <= r.budget <= 10


def test_a_client_owns_its_configuration_and_never_touches_the_default() -> None:
    from kubernetes.client import Configuration

    before = Configuration.get_default_copy().host
    a = KubeClient("https://a.example:6443/", token="ta", agent="agentihooks-operator/x")
    b = KubeClient("https://b.example:6443", token="tb")
    assert a.configuration is not b.configuration
    assert a.server == "https://a.example:6443" and Configuration.get_default_copy().host == before
    assert a.configuration.retries is False  # our retry loop only; urllib3 does not retry underneath
    with pytest.raises(ValueError, match="server URL or a configuration"):
        KubeClient()
    a.close()
    b.close()

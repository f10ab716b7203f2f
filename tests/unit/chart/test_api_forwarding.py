"""The chart gives each operator replica the address the others forward to: its own Pod IP and API
port, through the downward API, in a form the operator's settings accept."""

from __future__ import annotations

from typing import Any

import pytest
from agentihooks_operator.api.config import ApiConfig
from testsupport.helm import Helm, one


def operator_container(helm: Helm, values: dict[str, Any] | None = None) -> dict[str, Any]:
    deployment = one(helm.render(values), "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if any(e["name"] == "AGENTIHOOKS_API_ADVERTISE_URL" for e in c["env"]))


@pytest.mark.parametrize(("port", "pod_ip"), [(8080, "10.244.1.7"), (9443, "fd00:10:244::7")])
def test_each_replica_advertises_its_pod_ip_and_api_port(helm: Helm, port: int, pod_ip: str) -> None:
    container = operator_container(helm, {"operator": {"port": port}})
    names = [e["name"] for e in container["env"]]
    env = {e["name"]: e for e in container["env"]}
    # Kubernetes expands $(POD_IP) only from a variable listed before it.
    assert names.index("POD_IP") < names.index("AGENTIHOOKS_API_ADVERTISE_URL")
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    value = env["AGENTIHOOKS_API_ADVERTISE_URL"]["value"]
    assert value == f"http://$(POD_IP):{port}"
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["http"] == port
    expanded = value.replace("$(POD_IP)", pod_ip)
    host = f"[{pod_ip}]" if ":" in pod_ip else pod_ip
    assert ApiConfig(api_advertise_url=expanded).api_advertise_url == f"http://{host}:{port}"

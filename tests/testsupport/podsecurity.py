"""The Pod Security ``restricted`` profile, control by control: a worker Pod as the operator builds it, and
one way to break each control (the operator's own check in tests/unit/k8s/test_restricted_profile.py,
the real API server's admission in tests/integration/operator/test_restricted_profile_real.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentihooks_operator.k8s.building.pods import Execution, Owner, build_worker_pod
from agentihooks_operator.swarm import SwarmSpec

#: The Swarm and the attempt every worker Pod of the Pod-building unit tests is built for.
OWNER = Owner(name="example", namespace="team-a", uid="uid-1", controller="op-1")
EX = Execution(
    execution_id="exe-" + "c" * 32,
    generation=1,
    seat="eng-1",
    task_id="t-1",
    task_generation=1,
    grant_id="grant-1",
    controller_epoch=3,
)


def worker_pod(template: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "image": "ghcr.io/agentihooks/worker:2.1.0",
        "harness": {"name": "claude", "command": ["claude", "-p", "go"]},
        "seats": [{"name": "eng-1", "project": "github.com/acme/app", "task": {"id": "t-1", "text": "x"}}],
    }
    if template is not None:
        doc["podTemplate"] = template
    pod, _ = build_worker_pod(SwarmSpec.model_validate(doc), OWNER, EX, None)
    return pod


def psc(p: dict[str, Any]) -> dict[str, Any]:
    return p["spec"].setdefault("securityContext", {})


def box(p: dict[str, Any]) -> dict[str, Any]:
    return p["spec"]["containers"][0].setdefault("securityContext", {})


Edit = Callable[[dict[str, Any]], object]
#: (control, how the Pod breaks it, a piece of the refusal's text naming the field)
CONTROLS: list[tuple[str, Edit, str]] = [
    ("host network", lambda p: p["spec"].update(hostNetwork=True), "spec.hostNetwork"),
    ("host PID", lambda p: p["spec"].update(hostPID=True), "spec.hostPID"),
    ("host IPC", lambda p: p["spec"].update(hostIPC=True), "spec.hostIPC"),
    ("privileged", lambda p: box(p).update(privileged=True), "privileged"),
    ("hostProcess, Pod", lambda p: psc(p).update(windowsOptions={"hostProcess": True}), "hostProcess"),
    ("hostProcess, container", lambda p: box(p).update(windowsOptions={"hostProcess": True}), "hostProcess"),
    ("capability added", lambda p: box(p).update(capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
     "capabilities.add"),
    ("ALL not dropped", lambda p: box(p).update(capabilities={"drop": ["NET_RAW"]}), "capabilities.drop"),
    ("hostPath volume", lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
     "spec.volumes[h]"),
    ("nfs volume", lambda p: p["spec"]["volumes"].append({"name": "n", "nfs": {"server": "s", "path": "/"}}),
     "spec.volumes[n]"),
    ("host port", lambda p: p["spec"]["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
     "ports"),
    ("AppArmor unconfined, Pod", lambda p: psc(p).update(appArmorProfile={"type": "Unconfined"}),
     "spec.securityContext.appArmorProfile"),
    ("AppArmor unconfined, container", lambda p: box(p).update(appArmorProfile={"type": "Unconfined"}),
     "appArmorProfile"),
    ("AppArmor annotation", lambda p: p["metadata"].setdefault("annotations", {}).update(
        {"container.apparmor.security.beta.kubernetes.io/agent": "unconfined"}), "apparmor"),
    ("SELinux type", lambda p: box(p).update(seLinuxOptions={"type": "spc_t"}), "seLinuxOptions.type"),
    ("SELinux user", lambda p: psc(p).update(seLinuxOptions={"user": "system_u"}), "seLinuxOptions"),
    ("SELinux role", lambda p: box(p).update(seLinuxOptions={"role": "sysadm_r"}), "seLinuxOptions"),
    ("unmasked /proc", lambda p: box(p).update(procMount="Unmasked"), "procMount"),
    ("seccomp unconfined, Pod", lambda p: psc(p).update(seccompProfile={"type": "Unconfined"}),
     "spec.securityContext.seccompProfile"),
    ("seccomp unconfined, container", lambda p: box(p).update(seccompProfile={"type": "Unconfined"}),
     "seccompProfile"),
    ("seccomp unset everywhere", lambda p: (psc(p).pop("seccompProfile", None),
                                            box(p).pop("seccompProfile", None)), "seccompProfile"),
    ("unsafe sysctl", lambda p: psc(p).update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]), "sysctls"),
    ("privilege escalation", lambda p: box(p).update(allowPrivilegeEscalation=True),
     "allowPrivilegeEscalation"),
    ("privilege escalation unset", lambda p: box(p).pop("allowPrivilegeEscalation", None),
     "allowPrivilegeEscalation"),
    ("runAsNonRoot false", lambda p: box(p).update(runAsNonRoot=False), "runAsNonRoot"),
    ("runAsNonRoot unset everywhere", lambda p: (psc(p).pop("runAsNonRoot", None),
                                                 box(p).pop("runAsNonRoot", None)), "runAsNonRoot"),
    ("root user, Pod", lambda p: psc(p).update(runAsUser=0), "spec.securityContext.runAsUser"),
    ("root user, container", lambda p: box(p).update(runAsUser=0), "runAsUser"),
]  # fmt: skip

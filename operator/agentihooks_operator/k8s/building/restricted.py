"""The Pod Security ``restricted`` profile, applied by the operator to every worker Pod it builds.

Pod Security admission enforces the profile only in namespaces labelled for it, and the chart labels
none: a watched namespace without the label would take whatever a Swarm's Pod template asked for
(AppArmor unconfined, an SELinux type such as ``spc_t``, ``hostProcess``, an unmasked ``/proc``, an
unsafe sysctl). So the operator checks the Pod it is about to create, after the template is merged,
against every control of the profile (Kubernetes' "Pod Security Standards", baseline and
restricted, as of 1.30-1.37) and creates nothing that breaks one. Each violation names the field and
the control, never a value it read. :mod:`.podpolicy` refuses the same things earlier, by template
field; this is the check on what would really be sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

#: Baseline: sysctls any Pod may set (every other one is refused).
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
#: Baseline: the SELinux types a Pod may ask for ("" is unset).
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
#: Restricted: the volume kinds a Pod may use.
VOLUME_KINDS = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(kind) or []:
            yield f"spec.{kind}[{c.get('name')}]", c


def violations(pod: Mapping[str, Any]) -> list[str]:
    """Every control of the ``restricted`` profile ``pod`` breaks, as ``field: control`` texts."""
    spec = pod.get("spec") or {}
    psc = spec.get("securityContext") or {}
    out: list[str] = []
    for name in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(name) is True:
            out.append(f"spec.{name}: host namespaces are not allowed")
    out += _context("spec.securityContext", psc)
    for sysctl in psc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            out.append("spec.securityContext.sysctls: only the safe sysctls are allowed")
            break
    for v in spec.get("volumes") or []:
        kinds = [k for k in v if k != "name"]
        if any(k not in VOLUME_KINDS for k in kinds):
            out.append(f"spec.volumes[{v.get('name')}]: a volume of this kind is not allowed")
    for key, value in ((pod.get("metadata") or {}).get("annotations") or {}).items():
        if (
            key.startswith(APPARMOR_ANNOTATION)
            and value != "runtime/default"
            and not str(value).startswith("localhost/")
        ):
            out.append(f"metadata.annotations[{key}]: AppArmor may only be runtime/default or localhost/*")
    pod_non_root = psc.get("runAsNonRoot") is True
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        path = f"{where}.securityContext"
        out += _context(path, sc)
        if sc.get("privileged") is True:
            out.append(f"{path}.privileged: privileged containers are not allowed")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{path}.allowPrivilegeEscalation: must be false")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"{path}.procMount: only the Default /proc mount is allowed")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{path}.capabilities.drop: must include ALL")
        if any(cap != "NET_BIND_SERVICE" for cap in caps.get("add") or []):
            out.append(f"{path}.capabilities.add: only NET_BIND_SERVICE may be added")
        if not (sc.get("runAsNonRoot") is True or (pod_non_root and sc.get("runAsNonRoot") is not False)):
            out.append(f"{path}.runAsNonRoot: must be true (here or in spec.securityContext)")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost", "Unconfined") and not (
            pod_seccomp and seccomp is None
        ):
            out.append(f"{path}.seccompProfile: must be RuntimeDefault or Localhost (here or for the Pod)")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                out.append(f"{where}.ports: host ports are not allowed")
                break
    return out


def _context(path: str, sc: Mapping[str, Any]) -> list[str]:
    """The controls a Pod and a container securityContext share."""
    out = []
    if (sc.get("windowsOptions") or {}).get("hostProcess") is True:
        out.append(f"{path}.windowsOptions.hostProcess: HostProcess containers are not allowed")
    if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
        out.append(f"{path}.appArmorProfile: may only be RuntimeDefault or Localhost")
    se = sc.get("seLinuxOptions") or {}
    if se.get("type", "") not in SELINUX_TYPES:
        out.append(f"{path}.seLinuxOptions.type: only the container SELinux types are allowed")
    if se.get("user") or se.get("role"):
        out.append(f"{path}.seLinuxOptions: user and role may not be set")
    if sc.get("runAsUser") == 0:
        out.append(f"{path}.runAsUser: may not be 0 (root)")
    if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append(f"{path}.seccompProfile: may not be Unconfined")
    return out

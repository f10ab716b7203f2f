"""The Kubernetes API the demo runs against: kmock's emulator served on loopback, as its own process.

``python -m agentihooks_demo.emulator --port N --kubeconfig PATH`` declares
every resource the operator uses (kmock serves only declared ones), writes a
kubeconfig pointing at itself, prints one ``ready <url>`` line and serves
until it is signalled. There is no kubelet and no scheduler behind it: the
demo's simulated kubelet (:mod:`agentihooks_demo.kubelet`) plays that part.
The test suite's emulated cluster declares its resources and writes its
kubeconfig with the same functions (:func:`declare`, :func:`write_kubeconfig`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

import kmock

RESOURCES = {
    "v1/namespaces": ("Namespace", False),
    "v1/nodes": ("Node", False),
    "v1/pods": ("Pod", True),
    "v1/events": ("Event", True),
    "v1/secrets": ("Secret", True),
    "v1/configmaps": ("ConfigMap", True),
    "agentihooks.io/v1alpha1/swarms": ("Swarm", True),
}
VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}


def declare(emulator: kmock.KubernetesEmulator) -> None:
    """Declare every resource in :data:`RESOURCES` on ``emulator``, with all verbs and ``/status``."""
    for name, (kind, namespaced) in RESOURCES.items():
        emulator.resources[name] = kmock.ResourceInfo(
            kind=kind, namespaced=namespaced, verbs=set(VERBS), subresources={"status"}
        )


def write_kubeconfig(url: str, path: Path, *, name: str = "demo", token: str | None = None) -> None:
    """A kubeconfig whose only context (``name``) points at ``url`` (JSON is valid YAML)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": url, "insecure-skip-tls-verify": True}}],
        "users": [{"name": name, "user": {"token": token or "emulated-cluster"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
    }
    path.write_text(json.dumps(doc))
    path.chmod(0o600)


async def serve(port: int, kubeconfig: Path) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    emulator = kmock.KubernetesEmulator()
    async with emulator, kmock.Server(emulator, host="127.0.0.1", port=port) as server:
        declare(emulator)
        url = str(server.url).rstrip("/")
        write_kubeconfig(url, kubeconfig)
        print(f"ready {url}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="agentihooks-demo-emulator")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port, args.kubeconfig))
    sys.exit(0)


if __name__ == "__main__":
    main()

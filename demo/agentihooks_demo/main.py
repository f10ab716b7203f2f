"""``agentihooks-demo`` (``make demo``): the product's main job on one machine, with no cluster.

Starts a private redis-server, a Kubernetes API (kmock's emulator; with
``--control-plane`` a real etcd, kube-apiserver and kube-controller-manager),
the real operator (with its control API and ledger page) and a simulated
kubelet that runs real worker processes, then tells the story in
:mod:`agentihooks_demo.story`. ``--keep`` leaves everything running until
Ctrl-C; ``--ci`` checks every outcome and exits non-zero when one is wrong;
``--evidence PATH`` runs the acceptance cases instead (always on the real
control plane, plus a real node where the machine can host one) and writes the
evidence record; ``--real-node`` tells the story of a seat the kernel kills on
a real node (kubelet, containerd, runc; root).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
from pathlib import Path

from .containers import env_for_workers
from .harness import fake_harness_bin
from .kubelet import SimulatedKubelet
from .procs import Processes
from .stack import EMBEDDED, StackError, demo_repository, preflight, start_stack
from .story import demo_plan, run_story
from .world import StoryFailed, World


def say(text: str) -> None:
    print(text, flush=True)


async def _demo(args: argparse.Namespace, workdir: Path, procs: Processes) -> int:
    bin_dir = fake_harness_bin()
    stack = await asyncio.to_thread(start_stack, workdir, procs, say, control_plane=args.control_plane)
    repo = demo_repository(workdir / "demo-app")
    env = env_for_workers(bin_dir, workdir / "node" / "attempts", {"local:demo-app": str(repo)})
    kubelet = SimulatedKubelet(stack.kube.pod_api(), workdir / "node", env, plan=demo_plan, say=say)
    await kubelet.start()
    world = World(stack, kubelet, "demo", say=say)
    try:
        result = await run_story(world, check=args.ci)
        say("\n== agentihooks swarm demo status")
        say(result.status_table.rstrip())
        say("\n== restore outcomes (controller metrics)")
        for name, value in sorted(result.metrics.items()):
            if "restore_outcomes_by_type" in name:
                say(f"  {name} {value:g}")
        say(f"\nLedger page: {stack.control_url}/ledger/{stack.kube.namespace}/demo")
        say(f"  sign in with the operator token in {stack.token_file} (readable only by you)")
        say(f"CLI: export AGENTIHOOKS_CONTROL_URL={stack.control_url}")
        say(f'     export AGENTIHOOKS_TOKEN="$(cat {stack.token_file})"')
        say(f"Logs: {workdir / 'logs'} (operator, redis, API) and {workdir / 'node' / 'pods'} (workers)")
        plane = stack.kube.plane
        if plane is not None:
            say(f"Control plane: admin kubeconfig {plane.admin_kubeconfig}; logs and audit log in")
            say(f"  {plane.workdir}; the demo's objects are in namespace {stack.kube.namespace}")
        if args.ci:
            say("demo --ci: every outcome of the story checked")
        if args.keep:
            say("\n--keep: everything keeps running; press Ctrl-C to stop every process the demo started")
            await asyncio.Event().wait()
        return 0
    finally:
        await kubelet.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="agentihooks-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave everything running until Ctrl-C")
    parser.add_argument("--ci", action="store_true", help="check every outcome; exit 1 when one is wrong")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="where logs and state go (default: a temp dir)"
    )
    parser.add_argument(
        "--control-plane",
        action="store_true",
        help="run on a real etcd + kube-apiserver + kube-controller-manager instead of the emulator",
    )
    parser.add_argument(
        "--evidence",
        type=Path,
        default=None,
        help="run the acceptance cases (on the real control plane), write this record",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="run on a real node (kubelet, containerd, runc; root) beside the real control plane: the "
        "story of a seat the kernel kills; with --evidence, require the real-node case",
    )
    parser.add_argument(
        "--no-real-node",
        action="store_true",
        help="with --evidence: leave the real-node case out (it runs where the machine can host a node)",
    )
    args = parser.parse_args(argv)
    args.control_plane = args.control_plane or args.evidence is not None or args.real_node
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="agentihooks-demo-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    os.chmod(workdir, 0o700)
    if args.real_node and args.evidence is None:
        say("agentihooks-recovery demo on a REAL node: kubelet, containerd and runc run the worker image")
    elif args.evidence is not None and not args.no_real_node:
        say(
            "agentihooks-recovery evidence: where this machine can host one, four acceptance cases and "
            "a Codex container kill run on a REAL node (the worker image, real CLIs); the other cases' "
            "kubelet is SIMULATED (worker Pods run as local processes)"
        )
    else:
        say(
            "agentihooks-recovery demo: no cluster needed; the kubelet is SIMULATED "
            "(worker Pods run as local processes)"
        )
    if args.control_plane:
        from .localcluster import ANNOUNCE

        say(ANNOUNCE)
    else:
        say(EMBEDDED)
    say(f"work folder: {workdir}")
    procs = Processes()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    # A process started in the background by a shell without job control (a CI script's `cmd &`,
    # nohup) inherits SIGINT ignored, and Python then leaves it ignored: Ctrl-C (or `kill -INT`)
    # would never stop the demo. It always stops on SIGINT (two clean-clone CI runs hung on it).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 1
    try:
        preflight()
        if args.control_plane:
            from .localcluster import preflight as control_plane_preflight

            control_plane_preflight()
        if args.evidence is not None:
            from .evidence import run_evidence

            node = True if args.real_node else False if args.no_real_node else None
            code = asyncio.run(run_evidence(args.evidence.resolve(), workdir, procs, say, real_node=node))
        elif args.real_node:
            from .nodecase import node_demo

            code = asyncio.run(node_demo(workdir, procs, say, check=args.ci))
        else:
            code = asyncio.run(_demo(args, workdir, procs))
    except KeyboardInterrupt:
        say("\ninterrupted: stopping every process the demo started")
        code = 130
    except (StoryFailed, StackError) as e:
        say(f"demo FAILED: {e}\nlogs: {workdir / 'logs'}")
        code = 1
    finally:
        procs.stop_all()
        if args.control_plane:
            from .localcluster import remove_data

            remove_data(workdir)
        api = "etcd, kube-apiserver, kube-controller-manager" if args.control_plane else "the API emulator"
        say(f"stopped: redis-server, {api}, operator and every worker")
    sys.exit(code)


if __name__ == "__main__":
    main()

"""Benchmark the work an abrupt death loses: continuous capture against today's 300 s periodic one.

Each run is a real worker boot (``agentihooks-worker boot`` as a process) that restores a native
Claude checkpoint from a local store and runs the fake Claude, which ends a turn every T seconds
(T drawn per run) and runs its ``Stop`` hooks after each, as Claude Code does. At a random moment the
worker and the harness are SIGKILLed together (what a node crash leaves: no final capture). Per run:

* turns lost = turns the agent wrote - turns in the newest committed checkpoint (its watermark);
* captures taken, and bytes the store grew by per capture (each capture is still a whole checkpoint).

Both modes run in the same invocation, interleaved (continuous, then periodic, per kill moment), so the
machine's noise hits both alike. The agent runs faster than a real one (``--scale`` shrinks the turn
time of 2-5 s and the 1 s floor alike), so the runs fit in minutes; the lost work in turns does not
depend on the scale. Not a test: it asserts nothing. Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from agentihooks_checkpoint.scope import StoreScope  # noqa: E402
from agentihooks_checkpoint.stores import LocalStore  # noqa: E402
from testsupport.checkpoints import build_checkpoint  # noqa: E402
from testsupport.fake_harness import BIN, CLAUDE  # noqa: E402

SCOPE = StoreScope(swarm="bench", task_id="task-1", task_generation=1)
NEW = "exe-new"


def launch(built: object, folder: Path) -> Path:
    b = built
    record = {
        "schema_version": 1,
        "authority": {"execution_id": NEW, "generation": 2, "task_id": SCOPE.task_id, "seat_id": "s1",
                      "swarm_id": SCOPE.swarm, "grant_id": "g2"},
        "harness": "claude",
        "agent": [str(CLAUDE), "-p", "carry on"],
        "kill_seconds": 5,
        "registration": {"projects": ["local:fixture"], "task_generation": 1,
                         "compatibility_key": b.compatibility_key},  # type: ignore[attr-defined]
        "restore_from": {"execution_id": "exe-old", "execution_generation": 1},
        "restore": {"checkpoint_id": b.checkpoint_id, "recovery": "native",  # type: ignore[attr-defined]
                    "watermark": b.watermark, "session_id": b.session_id},  # type: ignore[attr-defined]
    }  # fmt: skip
    path = folder / "launch.json"
    path.write_text(json.dumps(record))
    return path


def store_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def one_run(mode: str, turn_s: float, kill_after: float, floor: float, folder: Path) -> dict[str, float]:
    folder.mkdir(parents=True)
    store = LocalStore(folder / "store")
    built = build_checkpoint(
        store, SCOPE, folder / "fenced", kind="claude", checkpoint_id="ckpt-7", sequence=7,
        execution_id="exe-old", harness_version="2.1.332",
    )  # fmt: skip
    before = store_bytes(folder / "store")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "AGENTIHOOKS_"))}
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "AGENTIHOOKS_CHECKPOINT_ROOT": str(folder / "store"),
            "AGENTIHOOKS_ATTEMPTS_DIR": str(folder / "attempts"),
            "AGENTIHOOKS_LAUNCH_RECORD": str(launch(built, folder)),
            "AGENTIHOOKS_PROJECT_REMOTES": json.dumps({"local:fixture": str(built.worktree)}),
            "AGENTIHOOKS_CAPTURE_MODE": mode,
            "AGENTIHOOKS_CAPTURE_INTERVAL_SECONDS": "300",
            "AGENTIHOOKS_CAPTURE_FLOOR_SECONDS": str(floor),
            "FAKE_HARNESS_RUN_SECONDS": "forever",
            "FAKE_HARNESS_TICK": str(turn_s),
            "FAKE_HARNESS_READY": str(folder / "ready"),
        }
    )
    cmd = [sys.executable, "-c", "from agentihooks_worker.cli import main; main()", "boot"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (folder / "ready").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not start: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.02)
    harness = int((folder / "ready").read_text())
    time.sleep(kill_after)
    for pid in (proc.pid, harness):  # the whole Pod at once
        os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    transcript = next((folder / "attempts").rglob("projects/*/*.jsonl"))
    written = transcript.read_bytes().count(b"\n")
    mine = store.list_checkpoints(SCOPE, execution_id=NEW)
    kept = max((c.watermark for c in mine if c.watermark is not None), default=built.watermark or 0) + 1
    captures = sum(1 for line in err.splitlines() if '"checkpoint_committed"' in line)
    grown = store_bytes(folder / "store") - before
    return {
        "lost": written - kept,
        "captures": captures,
        "bytes_per_capture": grown / captures if captures else 0.0,
        "session_bytes": transcript.stat().st_size,
    }


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="abrupt deaths per mode")
    parser.add_argument("--scale", type=float, default=0.25, help="the agent's speed-up (turns and floor)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results: dict[str, list[dict[str, float]]] = {"continuous": [], "periodic": []}
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        for i in range(args.kills):
            turn_s = rng.uniform(2.0, 5.0) * args.scale
            kill_after = rng.uniform(3.0, 12.0) * args.scale * 4  # a few turns into the run
            for mode, rows in results.items():
                rows.append(one_run(mode, turn_s, kill_after, 1.0 * args.scale, Path(tmp) / f"{i}-{mode}"))
    print(f"{args.kills} abrupt deaths per mode; a turn every 2-5 s x{args.scale}, floor 1 s x{args.scale}")
    for mode, rows in results.items():
        lost = [r["lost"] for r in rows]
        caps = [r["captures"] for r in rows]
        per = [r["bytes_per_capture"] for r in rows if r["captures"]]
        session = statistics.mean(r["session_bytes"] for r in rows)
        print(
            f"{mode:>10}: turns lost median {statistics.median(lost):.0f}, p95 {quantile(lost, 0.95):.0f}, "
            f"max {max(lost):.0f}; captures per run {statistics.mean(caps):.1f}; "
            f"store bytes per capture {statistics.mean(per):.0f} (transcript {session:.0f} B)"
        )
    base = statistics.mean(r["lost"] for r in results["periodic"]) or 1.0
    cont = statistics.mean(r["lost"] for r in results["continuous"])
    print(f"lost work, continuous / periodic: {cont / base:.3f}x")


if __name__ == "__main__":
    main()

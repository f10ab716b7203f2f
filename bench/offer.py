"""Benchmark what hashing a checkpoint before it is offered costs the failover pass.

The controller offers (and resumes without asking) only a checkpoint whose objects hash to its
record (``recovery/verified.py``). That verification is on the critical path of an automatic
native resume: the pass that fences the attempt hashes the checkpoint before it admits the
replacement (once per checkpoint; later looks are answered from memory). For checkpoints of a few
sizes on a local store and a real redis-server, this times the fencing pass with verification
(``verified``) against the same pass with it turned off (``by size``, what the controller did
before), in the same run, and prints their ratio. A later look at the same checkpoint (a card, a
listing, the next failure) re-reads only the stored objects' identities (a stat each here) and hashes
again only when one moved: the second table times that look against hashing again. Not a test: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

import redis  # noqa: E402
from agentihooks_checkpoint.scope import StoreScope  # noqa: E402
from agentihooks_checkpoint.stores import LocalStore  # noqa: E402
from agentihooks_operator.recovery import Recovery  # noqa: E402
from support.redisproc import private_redis  # noqa: E402
from testsupport.checkpoints import build_checkpoint  # noqa: E402
from testsupport.recovery import MemoryLauncher, observe, swarm_spec  # noqa: E402


def one_pass(
    client: redis.Redis, store: LocalStore, work: Path, n: int, records: int, verify: bool
) -> tuple[float, int, Recovery, StoreScope]:
    """Seconds of the pass that fences seat eng-1 and resumes it natively; the checkpoint's bytes."""
    swarm = f"bench-{n}-{'v' if verify else 's'}"
    spec = swarm_spec(1)
    r = Recovery(client, swarm, holder="bench", catalog=store, launcher=MemoryLauncher(), namespace="bench")
    if not verify:
        assert r._ctx.verifications is not None
        r._ctx.verifications.store = None  # listed by size only
    first = r.ensure_seats(spec)[0].execution_id
    r.report_session(first, "sess-1")
    scope = StoreScope(swarm=swarm, task_id="task-1", task_generation=1, namespace="bench")
    built = build_checkpoint(
        store,
        scope,
        work / swarm,
        execution_id=first,
        session_id="sess-1",
        records=records,
        compatibility_key=spec.compatibility_key,
        project_id="github.com/example/app",
    )
    r.report_watermark(first, built.watermark)
    size = sum(p.stat().st_size for p in (store.root / scope.prefix).rglob("*") if p.is_file())
    t0 = time.perf_counter()
    report = r.reconcile(spec, observe([(first, "eng-1", 1)], failed={first: "oom_killed"}))
    seconds = time.perf_counter() - t0
    [decision] = report.decisions
    assert decision.directive is not None and decision.directive.recovery.value == "native"
    return seconds, size, r, scope


def later_look(r: Recovery, store: LocalStore, scope: StoreScope, rounds: int) -> tuple[float, float]:
    """Median seconds of a later look: by the identities (unchanged), and hashing again (forgotten)."""
    v = r._ctx.verifications
    assert v is not None
    [summary] = store.list_checkpoints(scope)
    cheap, full = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        assert v.verified(scope, summary)
        cheap.append(time.perf_counter() - t0)
        v.forget(scope, summary.checkpoint_id)
        t0 = time.perf_counter()
        assert v.verified(scope, summary)
        full.append(time.perf_counter() - t0)
    return statistics.median(cheap), statistics.median(full)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, nargs="+", default=[100, 20000, 200000])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with private_redis("bench-offer-") as port, tempfile.TemporaryDirectory(prefix="bench-offer-") as tmp:
        client = redis.Redis(port=port)
        store = LocalStore(Path(tmp) / "store")
        n = 0
        print(f"{'transcript records':>18} {'checkpoint':>11} {'by size':>9} {'verified':>9} {'ratio':>6}")
        looks: list[tuple[int, float, float]] = []
        for records in args.records:
            timed: dict[bool, list[float]] = {True: [], False: []}
            size = 0
            for _ in range(args.rounds):
                for verify in (False, True):  # interleaved: the machine's noise hits both alike
                    n += 1
                    seconds, size, r, scope = one_pass(client, store, Path(tmp), n, records, verify)
                    timed[verify].append(seconds)
            looks.append((records, *later_look(r, store, scope, args.rounds)))
            plain, hashed = statistics.median(timed[False]), statistics.median(timed[True])
            mib = size / 1024 / 1024
            print(f"{records:>18} {mib:>8.2f} MiB {plain * 1e3:>6.1f} ms {hashed * 1e3:>6.1f} ms ", end="")
            print(f"{hashed / plain:>5.2f}x")
        print(f"\n{'a later look':>18} {'identities':>11} {'hash again':>11} {'ratio':>6}")
        for records, cheap, full in looks:
            print(f"{records:>18} {cheap * 1e3:>8.2f} ms {full * 1e3:>8.2f} ms {full / cheap:>6.1f}x")
        client.close()


if __name__ == "__main__":
    main()

"""Benchmark what one capture costs as the session grows: whole captures against segmented (event) ones.

For a Claude session of 1, 10 and 50 MiB (a transcript plus a small subagent file, in a real git
worktree), on the local store and on a moto S3 server in its own process, each round appends one turn
(4 KiB) and takes a whole capture (what every capture was before: the transcript and the native tar
sent again), then appends one more turn and takes an event capture (only what the transcript gained,
plus the native tar's head and trail). Interleaved, so the machine's noise hits both alike. Per kind:
the median time of a capture and the bytes the store grew by, and the segmented/whole ratio.

Then the restore side: verifying (and staging) the newest checkpoint of a chain at its cap (32
objects per artifact) against verifying a whole checkpoint of the same session. Not a test: it asserts
nothing. Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

import boto3  # noqa: E402
from agentihooks_checkpoint.stores import LocalStore, S3Store  # noqa: E402
from agentihooks_checkpoint.stores.base import CheckpointStore  # noqa: E402
from agentihooks_worker.capture.segments import MAX_CHAIN  # noqa: E402
from testsupport.sessions import GrowingSession  # noqa: E402

MIB = 1024 * 1024
TURN = 4096
#: Seconds added before each S3 request (a network round trip; moto on loopback has none).
DELAY = {"s": 0.0}


def stored(session: GrowingSession) -> int:
    store, scope = session.store, session.scope
    return sum(store.size_of(scope, k) or 0 for k in store.list_keys(scope, ""))


def timed(session: GrowingSession, *, segments: bool) -> tuple[float, int]:
    """One capture after one more turn: (seconds, bytes the store grew by)."""
    session.add_turns(1, size=TURN)
    before = stored(session)
    t0 = time.perf_counter()
    session.capture(segments=segments)
    return time.perf_counter() - t0, stored(session) - before


def grown(store: CheckpointStore, folder: Path, mib: int) -> GrowingSession:
    session = GrowingSession(store, folder)
    lines = max(1, mib * MIB // (TURN + 100))
    session.add_turns(lines, size=TURN)
    return session


def costs(store: CheckpointStore, folder: Path, mib: int, rounds: int) -> dict[str, list[tuple[float, int]]]:
    session = grown(store, folder, mib)
    session.capture(segments=False)
    out: dict[str, list[tuple[float, int]]] = {"whole": [], "segmented": []}
    for _ in range(rounds):
        out["whole"].append(timed(session, segments=False))
        out["segmented"].append(timed(session, segments=True))
    return out


def restore_times(session: GrowingSession, rounds: int, latency_s: float) -> tuple[float, float]:
    """Median seconds to verify and stage (each S3 request ``latency_s`` late): a whole checkpoint, and
    the newest of a chain at its cap."""
    folder = session.tmp
    whole = session.capture(segments=False)
    newest = whole
    for _ in range(MAX_CHAIN - 1):
        session.add_turns(1, size=TURN)
        newest = session.capture(segments=True)
    assert len(session.record(newest)["segments"]["transcript"]) == MAX_CHAIN
    DELAY["s"] = latency_s
    times: dict[str, list[float]] = {"whole": [], "chain": []}
    for i in range(rounds):
        for kind, checkpoint_id in (("whole", whole), ("chain", newest)):
            t0 = time.perf_counter()
            verdict = session.verify(checkpoint_id, folder / f"stage-{kind}-{i}")
            times[kind].append(time.perf_counter() - t0)
            assert verdict.ok, verdict
    DELAY["s"] = 0.0
    return statistics.median(times["whole"]), statistics.median(times["chain"])


def report(name: str, mib: int, got: dict[str, list[tuple[float, int]]]) -> None:
    t = {k: statistics.median(s for s, _ in v) for k, v in got.items()}
    b = {k: statistics.median(n for _, n in v) for k, v in got.items()}
    print(
        f"{name:5} {mib:3} MiB | whole {t['whole'] * 1000:8.1f} ms {b['whole'] / MIB:7.2f} MiB"
        f" | segmented {t['segmented'] * 1000:7.1f} ms {b['segmented'] / 1024:7.1f} KiB"
        f" | time {t['segmented'] / t['whole']:.3f}x, bytes {b['segmented'] / b['whole']:.4f}x"
    )


def moto() -> tuple[subprocess.Popen[bytes], Callable[[], CheckpointStore]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    for _ in range(100):
        try:
            client.list_buckets()
            break
        except Exception:
            time.sleep(0.1)
    count = iter(range(1_000_000))

    def add_latency(**_kw: object) -> None:
        if DELAY["s"]:
            time.sleep(DELAY["s"])  # models one network round trip per request

    client.meta.events.register("before-send.s3", add_latency)

    def make() -> CheckpointStore:
        bucket = f"bench-{next(count)}"
        client.create_bucket(Bucket=bucket)
        return S3Store(bucket, client)

    return proc, make


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1,10,50", help="session sizes in MiB (default 1,10,50)")
    p.add_argument("--rounds", type=int, default=5, help="captures of each kind per size (default 5)")
    p.add_argument("--no-s3", action="store_true", help="the local store only")
    p.add_argument(
        "--s3-latency-ms",
        type=int,
        default=20,
        help="a round trip added to S3 requests of restores (default 20)",
    )
    args = p.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    proc, s3 = (None, None) if args.no_s3 else moto()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            stores: list[tuple[str, Callable[[], CheckpointStore]]] = []
            stores.append(("local", lambda: LocalStore(root / f"store-{time.monotonic_ns()}")))
            if s3 is not None:
                stores.append(("s3", s3))
            print(f"one capture after one {TURN // 1024} KiB turn, median of {args.rounds}, interleaved")
            for name, make in stores:
                for mib in sizes:
                    report(name, mib, costs(make(), root / f"c-{name}-{mib}", mib, args.rounds))
            print(f"verify and stage: a whole checkpoint against a chain at its cap ({MAX_CHAIN})")
            runs = [(n, m, 0) for n, m in stores] + ([("s3", s3, args.s3_latency_ms)] if s3 else [])
            for name, make, latency_ms in runs:
                for mib in sizes:
                    session = grown(make(), root / f"r-{name}-{mib}-{latency_ms}", mib)
                    whole, chain = restore_times(session, 3, latency_ms / 1000)
                    label = f"{name}+{latency_ms}ms" if latency_ms else name
                    print(
                        f"{label:10} {mib:3} MiB | whole {whole * 1000:8.1f} ms"
                        f" | chain {chain * 1000:8.1f} ms | {chain / whole:.2f}x"
                    )
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()

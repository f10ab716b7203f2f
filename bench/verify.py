"""Benchmark Validator.verify: local throughput against plain sha256, RSS growth, S3 concurrency.

Builds a checkpoint of about ``--size-mib`` (one large object plus many small
ones) in a LocalStore, then, each in a fresh child process so peak RSS is its
own: (a) hashes the same bytes with plain ``hashlib.sha256`` (the baseline) and
(b) runs ``Validator.verify`` (with staging, as a restore would). It prints the
throughput ratio (target >= 0.8) and the peak RSS growth of the verify process
(target < 64 MiB). Then it starts a moto S3 server in its own process and
compares concurrent with sequential verification of a smaller checkpoint.
Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentihooks_checkpoint.layout import object_key
from agentihooks_checkpoint.model import WRITTEN_VERSION
from agentihooks_checkpoint.scope import StoreScope
from agentihooks_checkpoint.stores import LocalStore, S3Store
from agentihooks_checkpoint.stores.base import CheckpointStore
from agentihooks_checkpoint.validator import Validator

SCOPE = StoreScope(swarm="bench", task_id="task-1", task_generation=1)
MIB = 1024 * 1024


def put_generated(store: CheckpointStore, size: int, seed: int, tmp: Path) -> tuple[str, int]:
    """Write ``size`` pseudo-random bytes as an object without holding them in memory."""
    h = hashlib.sha256()
    src = tmp / f"gen-{seed}"
    block = hashlib.sha256(str(seed).encode()).digest() * (MIB // 32)
    with src.open("wb") as f:
        left = size
        i = 0
        while left > 0:
            chunk = (block[i % 32 :] + block[: i % 32])[: min(MIB, left)]
            f.write(chunk)
            h.update(chunk)
            left -= len(chunk)
            i += 1
    digest = "sha256:" + h.hexdigest()
    if isinstance(store, LocalStore):
        final = store.root / SCOPE.prefix / object_key(digest)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, final)
    else:
        store.write_file(SCOPE, object_key(digest), src)
        src.unlink()
    return digest, size


def build(store: CheckpointStore, large: int, small_count: int, small_size: int, tmp: Path) -> list[str]:
    entries = []
    d, s = put_generated(store, large, 0, tmp)
    entries.append({"role": "transcript", "path": "transcript.jsonl", "size": s, "digest": d})
    for i in range(small_count):
        d, s = put_generated(store, small_size, i + 1, tmp)
        entries.append({"role": f"blob_{i:05d}", "path": f"blobs/{i:05d}", "size": s, "digest": d})
    record = {
        "schema_version": WRITTEN_VERSION,
        "operation_id": "bench",
        "authority": {
            "execution_id": "exe-bench",
            "task_id": SCOPE.task_id,
            "task_generation": 1,
            "project_id": "unknown",
            "execution_generation": 1,
        },
        "checkpoint_id": "ckpt-bench",
        "checkpoint_sequence": 1,
        "status": "complete",
        "created_at": "2026-01-01T00:00:00Z",
        "committed_at": "2026-01-01T00:00:00Z",
        "native_resume_capability": "unsupported",
        "base_commit": "0" * 40,
        "head_commit": "0" * 40,
        "branch_name": "main",
        "transcript_durable_cursor": {"sequence": 1},
        "artifact_hashes": {e["role"]: e["digest"] for e in entries},
        "exclusions": [],
        "quiescence_method": "stopped_process",
        "dependencies_manifest": {},
        "restore_constraints": [],
        "compatibility_key": "bench",
        "harness": "claude",
        "artifacts": entries,
    }
    data = json.dumps(record).encode()
    store.write_manifest(SCOPE, "ckpt-bench", data)
    store.commit_written(SCOPE, "ckpt-bench", data)
    return [str(e["digest"]) for e in entries]


def rss_kib() -> int:
    """Peak RSS of this process so far (KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def current_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return rss_kib()


def child(mode: str, root: str, stage: str) -> None:
    """Run one measurement in this (fresh) process and print JSON."""
    store = LocalStore(Path(root))
    start_rss = current_rss_kib()
    t0 = time.perf_counter()
    if mode in {"baseline", "baseline-copy"}:
        digests = json.loads((Path(root).parent / "digests.json").read_text())
        copy_to = Path(stage) if mode == "baseline-copy" else None
        if copy_to is not None:
            copy_to.mkdir()
        for i, d in enumerate(digests):
            h = hashlib.sha256()
            out = (copy_to / str(i)).open("wb") if copy_to is not None else None
            with (store.root / SCOPE.prefix / object_key(d)).open("rb") as f:
                while chunk := f.read(MIB):
                    h.update(chunk)
                    if out is not None:
                        out.write(chunk)
            if out is not None:
                out.close()
            assert "sha256:" + h.hexdigest() == d
        ok = True
    else:
        v = Validator().verify(
            store, SCOPE, "ckpt-bench", execution_id="exe-bench", execution_generation=1,
            stage_dir=Path(stage) if mode == "verify-staged" else None,
        )  # fmt: skip
        ok = v.ok
    secs = time.perf_counter() - t0
    print(json.dumps({"seconds": secs, "ok": ok, "rss_start_kib": start_rss, "rss_peak_kib": rss_kib()}))


def run_child(mode: str, root: Path, stage: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--root", str(root), "--stage", str(stage)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    result: dict[str, float] = json.loads(out.stdout)
    return result


def local_bench(args: argparse.Namespace, tmp: Path) -> None:
    store = LocalStore(tmp / "store")
    total = args.size_mib * MIB
    small_total = args.small_count * args.small_size
    digests = build(store, total - small_total, args.small_count, args.small_size, tmp)
    (tmp / "digests.json").write_text(json.dumps(digests))
    print(f"local: {total / MIB:.0f} MiB = 1 object of {(total - small_total) / MIB:.0f} MiB "
          f"+ {args.small_count} of {args.small_size // 1024} KiB")  # fmt: skip
    stage = tmp / "stage"
    run_child("baseline", store.root, stage)  # warm the page cache
    # Alternate baseline and candidate runs and keep the best of each: the machine is shared.
    runs: dict[str, list[dict[str, float]]] = {
        m: [] for m in ("baseline", "verify", "baseline-copy", "verify-staged")
    }
    for _ in range(args.repeat):
        for mode, results in runs.items():
            results.append(run_child(mode, store.root, stage))
            shutil.rmtree(stage, ignore_errors=True)
    best = {m: min(rs, key=lambda r: r["seconds"]) for m, rs in runs.items()}
    print(f"  best of {args.repeat} alternating runs each, every run in a fresh process")
    print(f"  baseline hashlib.sha256        {total / MIB / best['baseline']['seconds']:6.0f} MiB/s")
    print(f"  baseline sha256 + file copy    {total / MIB / best['baseline-copy']['seconds']:6.0f} MiB/s")
    report("verify, hash only", best["verify"], best["baseline"], "sha256", total)
    report("verify + staging", best["verify-staged"], best["baseline"], "sha256", total)
    report("verify + staging", best["verify-staged"], best["baseline-copy"], "sha256+copy", total)


def report(name: str, r: dict[str, float], b: dict[str, float], bname: str, total: int) -> None:
    growth = (r["rss_peak_kib"] - r["rss_start_kib"]) / 1024
    print(
        f"  {name:18s} ok={bool(r['ok'])} {total / MIB / r['seconds']:6.0f} MiB/s; "
        f"throughput ratio vs {bname} = {b['seconds'] / r['seconds']:.2f} (target >= 0.8); "
        f"peak RSS growth {growth:.1f} MiB (target < 64)"
    )


def s3_bench(args: argparse.Namespace, tmp: Path) -> None:
    import boto3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        client = boto3.client(
            "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
        )
        for _ in range(100):
            try:
                client.create_bucket(Bucket="bench")
                break
            except Exception:
                time.sleep(0.1)
        store = S3Store("bench", client)
        count = args.s3_objects
        size = args.s3_size_mib * MIB // count
        build(store, size, count - 1, size, tmp)
        delay = {"s": 0.0}

        def add_latency(**_kw: object) -> None:
            if delay["s"]:
                time.sleep(delay["s"])  # models one network round trip per request

        client.meta.events.register("before-send.s3.GetObject", add_latency)
        print(
            f"s3 (moto server in its own process): {args.s3_size_mib} MiB in {count} objects, best of 2 each"
        )
        for latency_ms in (0, args.s3_latency_ms):
            delay["s"] = latency_ms / 1000
            times: dict[int, float] = {}
            for conc in (1, 8, 1, 8):
                store.max_concurrency = conc
                t0 = time.perf_counter()
                v = Validator().verify(
                    store, SCOPE, "ckpt-bench", execution_id="exe-bench", execution_generation=1
                )
                elapsed = time.perf_counter() - t0
                times[conc] = min(times.get(conc, elapsed), elapsed)
                assert v.ok
            label = "no added latency" if not latency_ms else f"+{latency_ms} ms per GET (simulated RTT)"
            print(f"  {label:34s} sequential {times[1]:.2f}s, concurrent (8) {times[8]:.2f}s, "
                  f"speed-up {times[1] / times[8]:.2f}x")  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mib", type=int, default=1024, help="local checkpoint size (default 1024)")
    p.add_argument("--small-count", type=int, default=1000, help="number of small objects (default 1000)")
    p.add_argument(
        "--small-size", type=int, default=32 * 1024, help="bytes per small object (default 32 KiB)"
    )
    p.add_argument("--s3-size-mib", type=int, default=64, help="S3 checkpoint size (default 64)")
    p.add_argument("--s3-objects", type=int, default=32, help="S3 object count (default 32)")
    p.add_argument("--s3-latency-ms", type=int, default=20, help="simulated round trip per GET (default 20)")
    p.add_argument("--repeat", type=int, default=3, help="alternating runs per mode, best kept (default 3)")
    p.add_argument("--skip-s3", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.add_argument("--stage", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.root, args.stage)
        return
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as d:
        local_bench(args, Path(d))
    if not args.skip_s3:
        with tempfile.TemporaryDirectory(prefix="bench-verify-s3-") as d:
            s3_bench(args, Path(d))


if __name__ == "__main__":
    main()

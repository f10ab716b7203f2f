"""The agent cannot read the worker's credential out of its supervisor (a real child process).

The supervisor process is started, as in a worker Pod, without any capability (``setpriv`` drops
them all, so even this test's root user has no ``CAP_SYS_PTRACE`` or ``CAP_DAC_OVERRIDE``, as the
Pod's uid 1000 under Pod Security ``restricted``), with the credential in its environment. It marks
itself not dumpable as ``agentihooks-worker boot`` does and runs a harness through the real
:class:`Supervisor` with the attempt's environment. The harness tries ``/proc/<ppid>/environ``,
``/proc/<ppid>/mem`` and ``/proc/<ppid>/cmdline`` and its own environment. The same run without the
mark shows the probe would have found the credential (the test can fail).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TOKEN = "wkr-3f9c1d2e-PROC-HARDENING-not-for-the-agent"

SUPERVISOR = r"""
import json, sys
from pathlib import Path
from agentihooks_worker.attempt import WORKER_ONLY
from agentihooks_worker.hardening import dumpable, keep_children_out
from agentihooks_worker.supervisor import Supervisor
import os

if sys.argv[1] == "on":
    keep_children_out()
env = {k: v for k, v in os.environ.items() if k not in WORKER_ONLY}
out = Path(sys.argv[2])
code = Supervisor([sys.executable, "-c", sys.argv[3], str(out)], env=env, cwd=out.parent).run()
print(json.dumps({"dumpable": dumpable(), "code": code}))
"""

HARNESS = r"""
import json, os, sys
WANTED = REVERSED[::-1].encode()
ppid = os.getppid()
seen = {}
for name in ("environ", "mem", "cmdline"):
    try:
        with open(f"/proc/{ppid}/{name}", "rb") as f:
            if name == "mem":
                maps = open(f"/proc/{ppid}/maps").read().split("\n")
                stack = next(l for l in maps if "[stack]" in l)
                lo, hi = (int(x, 16) for x in stack.split()[0].split("-"))
                f.seek(lo)
                data = f.read(hi - lo)
            else:
                data = f.read()
        seen[name] = "read"
        seen[name + "_has_token"] = WANTED in data
    except OSError as e:
        seen[name] = type(e).__name__
seen["own_env_has_token"] = any("PROC-HARDENING" in v for v in os.environ.values())
open(sys.argv[1], "w").write(json.dumps(seen))
"""


# The probe is told the credential reversed, so no command line of this test holds it as such.
def _run(tmp_path: Path, mode: str) -> tuple[dict[str, object], dict[str, object]]:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to start the supervisor without capabilities")
    out = tmp_path / f"{mode}.json"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(sys.path),
        "AGENTIHOOKS_WORKER_TOKEN": TOKEN,
    }
    argv = [setpriv, "--bounding-set=-all", "--inh-caps=-all", sys.executable, "-c", SUPERVISOR]
    res = subprocess.run(
        [*argv, mode, str(out), HARNESS.replace("REVERSED", repr(TOKEN[::-1]))],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), json.loads(out.read_text())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")
def test_the_harness_cannot_read_the_credential_from_its_supervisor(tmp_path: Path) -> None:
    parent, seen = _run(tmp_path, "on")
    assert parent == {"dumpable": False, "code": 0}
    assert seen["environ"] == "PermissionError", seen
    assert seen["mem"] == "PermissionError", seen
    assert seen["own_env_has_token"] is False
    assert seen.get("cmdline_has_token") in (None, False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")
def test_without_the_mark_the_same_probe_finds_the_credential(tmp_path: Path) -> None:
    parent, seen = _run(tmp_path, "off")
    assert parent["dumpable"] is True
    assert seen["environ"] == "read" and seen["environ_has_token"] is True, seen
    assert seen["own_env_has_token"] is False  # the harness's own environment never had it

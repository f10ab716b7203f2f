"""The demo's story: seats lose their Pods in several ways and come back, each exactly once.

* ``eng-1`` is OOM-killed; its checkpoint is native and it held a session, so
  the operator resumes it natively without asking anyone.
* ``eng-2`` runs a harness build that is not qualified for native resume (its
  checkpoints hold context only), then its container cannot be re-pulled;
  past the image-pull grace it waits, ``restore-decision eng-2 resume`` is
  posted through the CLI, and it continues reconstructed. The same request
  again changes nothing; a different choice is refused.
* ``cx-1`` of swarm ``demo-codex`` (a Swarm has one harness) is the same with
  Codex: OOM-killed, resumed natively through ``codex exec resume``.
* ``eng-3`` is a spawn superseded as a legacy specification that never
  started: it is replaced fresh without a choice.

:func:`run_story` returns the observed outcomes; with ``check`` it raises
:class:`StoryFailed` when any of them is not what the product promises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .kubelet import PodRun
from .world import World, expect

IMAGE = "ghcr.io/agentihooks/worker:2.1.0"
PROJECT = "local:demo-app"
UNQUALIFIED_CLAUDE = "2.0.77 (Claude Code)"
SUPERSEDED = {"swarm.agentihooks.io/superseded": "legacy-specification"}


def demo_spec() -> dict[str, Any]:
    def seat(name: str, task: str, text: str) -> dict[str, Any]:
        return {"name": name, "project": PROJECT, "task": {"id": task, "text": text}}

    return {
        "image": IMAGE,
        "harness": {"name": "claude", "command": ["claude", "-p", "Work on your task"]},
        "seats": [
            seat("eng-1", "t-parser", "Port the parser"),
            seat("eng-2", "t-tests", "Write the parser tests"),
            seat("eng-3", "t-docs", "Document the parser"),
        ],
        "recovery": {"automation": True, "imagePullGraceSeconds": 2, "passIntervalSeconds": 0.5},
        "checkpointStore": {"remote": True},
    }


def codex_spec() -> dict[str, Any]:
    """A second swarm whose harness is Codex (a Swarm has one harness)."""
    return {
        "image": IMAGE,
        "harness": {"name": "codex", "command": ["codex", "exec", "Work on your task"]},
        "seats": [{"name": "cx-1", "project": PROJECT, "task": {"id": "t-cli", "text": "Add a CLI"}}],
        "recovery": {"automation": True, "passIntervalSeconds": 0.5},
        "checkpointStore": {"remote": True},
    }


def demo_plan(run: PodRun) -> str | dict[str, str]:
    """How the simulated kubelet treats each Pod (the injected conditions of the story)."""
    if run.seat == "eng-2" and run.generation == 1:
        return {"FAKE_CLAUDE_VERSION": UNQUALIFIED_CLAUDE}
    if run.seat == "eng-3" and run.generation == 1:
        return "hold"
    return {}


@dataclass
class StoryResult:
    continuity: dict[str, str] = field(default_factory=dict)
    pods: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    status_table: str = ""
    #: The namespace the demo's Swarms live in (their metrics' ``namespace`` label).
    namespace: str = "default"


async def run_story(w: World, *, check: bool) -> StoryResult:
    result = StoryResult(namespace=w.stack.kube.namespace)
    w.step("creating Swarm 'demo' (3 seats, Claude Code harness, automation on, image-pull grace 2s)")
    await w.create_swarm(demo_spec())
    cx = World(w.stack, w.kubelet, "demo-codex", say=w.say, started=w.started)
    w.step("creating Swarm 'demo-codex' (1 seat, Codex harness)")
    await cx.create_swarm(codex_spec())
    eng1 = await w.run_of("eng-1", 1)
    eng2 = await w.run_of("eng-2", 1)
    eng3 = await w.run_of("eng-3", 1, started=False)
    w.step("operator launched one Pod per seat; the kubelet started eng-1 and eng-2, eng-3 stays Pending")
    native = await w.captured(eng1, native=True)
    w.step(f"eng-1's worker committed checkpoint {native['checkpoint_id']} (native)")
    context = await w.captured(eng2, native=False)
    w.step(f"eng-2's worker committed checkpoint {context['checkpoint_id']} (context only)")

    # eng-1: OOM-killed -> native resume without asking.
    await w.kubelet.oom_kill(eng1)
    w.step("eng-1: the kubelet OOM-kills the worker (exit 137, reason OOMKilled)")
    eng1b = await w.run_of("eng-1", 2)
    line = await w.worker_event(eng1b, "restore_verified", "restore_refused")
    w.step(f"eng-1: operator resumed without asking; generation 2 logged {_short(line)}")
    result.continuity["eng-1"] = str(line.get("recovery") or line.get("reason"))

    # cx-1 (Codex): the same, through `codex exec resume <session>`.
    cx1 = await cx.run_of("cx-1", 1)
    row = await cx.captured(cx1, native=True)
    w.step(f"cx-1's worker (Codex) committed checkpoint {row['checkpoint_id']} (native)")
    await w.kubelet.oom_kill(cx1)
    w.step("cx-1: the kubelet OOM-kills the Codex worker")
    cx1b = await cx.run_of("cx-1", 2)
    line = await cx.worker_event(cx1b, "restore_verified", "restore_refused")
    w.step(f"cx-1: operator resumed without asking; generation 2 logged {_short(line)}")
    result.continuity["cx-1"] = str(line.get("recovery") or line.get("reason"))

    # eng-2: image pull failure past its grace -> waits -> resume -> reconstructed.
    await w.kubelet.image_pull_failure(eng2)
    w.step("eng-2: the kubelet reports ErrImagePull for the worker's container (grace: 2s)")
    card = await w.card("eng-2", binding="awaiting decision")
    w.step(f"eng-2: fenced, waiting for a decision; card: {card.get('reason')!r}")
    w.step(f"eng-2: the card's resume control reads {card.get('resume_label')!r}")
    result.outputs["card_eng2"] = str(card.get("resume_label"))
    _cli(w, result, "resume", "resume")
    eng2b = await w.run_of("eng-2", 2)
    line = await w.worker_event(eng2b, "restore_verified", "restore_refused")
    w.step(f"eng-2: generation 2 logged {_short(line)}")
    result.continuity["eng-2"] = str(line.get("recovery") or line.get("reason"))
    await w.card("eng-2", continuity="reconstructed")
    _cli(w, result, "repeat", "resume", note="the same request again")
    _cli(w, result, "conflict", "fresh", note="a different choice")

    # eng-3: superseded legacy spawn -> fresh without a choice.
    await w.annotate(eng3, SUPERSEDED)
    await w.kubelet.fail_pending(eng3, 64)
    w.step("eng-3: its Pending spawn is marked superseded (legacy specification) and fails before starting")
    eng3b = await w.run_of("eng-3", 2)
    line = await w.worker_event(eng3b, "restore_verified", "restore_refused")
    w.step(f"eng-3: replaced fresh without a choice; generation 2 logged {_short(line)}")
    result.continuity["eng-3"] = str(line.get("recovery") or line.get("reason"))

    for seat, kind in (("eng-1", "native"), ("eng-3", "fresh")):
        await w.card(seat, continuity=kind)
    await cx.card("cx-1", continuity="native")
    result.pods = {seat: len(w.kubelet.runs(seat)) for seat in ("eng-1", "eng-2", "eng-3", "cx-1")}
    result.metrics = await w.metrics()
    result.status_table = w.stack.cli("swarm", "demo", "status").stdout
    if check:
        verify(result)
    return result


def _cli(w: World, result: StoryResult, key: str, choice: str, note: str = "") -> None:
    done = w.stack.cli("swarm", "demo", "restore-decision", "eng-2", choice)
    result.outputs[key] = (done.stdout + done.stderr).strip()
    result.outputs[key + "_exit"] = str(done.returncode)
    w.step(f"$ agentihooks swarm demo restore-decision eng-2 {choice}" + (f"   ({note})" if note else ""))
    w.say(f"         {result.outputs[key]}")


def _short(line: dict[str, Any]) -> str:
    keep = ("event", "recovery", "checkpoint_id", "watermark", "reason")
    return "{" + ", ".join(f"{k}: {line[k]}" for k in keep if k in line) + "}"


def _series(key: str) -> tuple[str, frozenset[str]]:
    """``name{a="x",b="y"}`` as its name and label pairs (the exposition orders labels as it likes)."""
    name, _, labels = key.partition("{")
    return name, frozenset(p for p in labels.rstrip("}").split(",") if p)


def metric_value(metrics: dict[str, float], key: str) -> float | None:
    """The value of series ``key`` whatever the order of its labels, or ``None``."""
    want = _series(key)
    return next((v for k, v in metrics.items() if _series(k) == want), None)


def outcome_count(metrics: dict[str, float], kind: str) -> float:
    return sum(v for k, v in metrics.items() if "restore_outcomes_by_type" in k and f'type="{kind}"' in k)


def verify(r: StoryResult) -> None:
    expect(
        r.continuity == {"eng-1": "native", "cx-1": "native", "eng-2": "reconstructed", "eng-3": "fresh"},
        f"continuity per seat was {r.continuity}",
    )
    want = {"eng-1": 2, "eng-2": 2, "eng-3": 2, "cx-1": 2}
    expect(r.pods == want, f"Pods per seat (one replacement each): {r.pods}")
    expect(
        r.outputs["card_eng2"] == "Continue from context", f"eng-2's card offered {r.outputs['card_eng2']!r}"
    )
    expect(
        "replayed" in r.outputs["repeat"] or "already" in r.outputs["repeat"],
        f"the repeated request answered {r.outputs['repeat']!r}",
    )
    expect(
        r.outputs["conflict_exit"] != "0"
        and "no recovery decision is pending for this attempt" in r.outputs["conflict"],
        f"the conflicting request answered {r.outputs['conflict']!r}",
    )
    ns = r.namespace
    want_counts = {
        f'agentihooks_fences_total{{namespace="{ns}",swarm="demo",reason="oom_killed"}}': 1,
        f'agentihooks_fences_total{{namespace="{ns}",swarm="demo",reason="image_pull"}}': 1,
        f'agentihooks_fences_total{{namespace="{ns}",swarm="demo",reason="application_exit"}}': 1,
        f'agentihooks_decisions_by_decider_total{{namespace="{ns}",swarm="demo",decider="automation"}}': 2,
        f'agentihooks_decisions_by_decider_total{{namespace="{ns}",swarm="demo",decider="operator"}}': 1,
        f'agentihooks_seats_awaiting_decision{{namespace="{ns}",swarm="demo"}}': 0,
    }
    for name, value in want_counts.items():
        got = metric_value(r.metrics, name)
        expect(got == value, f"{name} was {got}, expected {value}")
    for kind in ("native", "reconstructed", "fresh"):
        expect(
            outcome_count(r.metrics, kind) == 1, f"restore_outcomes_by_type{{type={kind}}} != 1: {r.metrics}"
        )

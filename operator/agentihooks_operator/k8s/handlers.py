"""Thin kopf handlers: wiring only; the work is in :mod:`.swarmpass` and the recovery core.

* start-up creates the Redis and Kubernetes clients once (kept in kopf's memo),
  clean-up closes them;
* every Swarm gets a daemon that runs a pass at once when one of its Pods
  changes (triggers coalesce: many events before the pass starts make one
  pass) and at least every ``passIntervalSeconds``;
* an invalid spec becomes ``SpecValid=False``, ``Ready=False`` and
  ``Stalled=True`` conditions, one ``InvalidSpec`` Warning Event and a
  ``kopf.PermanentError`` (:mod:`.specstatus`); Redis and API failures become
  a warning and a retry by the same pass object after a delay (it keeps its lease and epoch);
* ``Ready`` follows each pass (:mod:`.conditions`): written only when what it
  says changes, False while Redis is unreachable, RBAC refuses a call, a launch
  is blocked, or nobody has held the lease for over its TTL;
* a call the operator's RBAC refused (``AccessDenied``) is logged by kopf and
  posted once as a ``Forbidden`` Warning Event on the Swarm, naming the verb,
  resource and namespace, and the pass is retried after at least a pass
  interval; the operator never exits over it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import kopf
import redis
from agentihooks_checkpoint.catalog import EmptyCatalog
from agentihooks_checkpoint.stores.env import store_from_env
from pydantic import ValidationError

from .. import instruments, logs
from ..instruments import TimedLauncher
from ..recovery import HttpBrokers, LeaseLost, Recovery
from ..recovery.errors import RecoveryError
from ..recovery.identity import SwarmId
from ..recovery.lease import LeaseChurn
from ..recovery.store import layout
from ..recovery.store.clock import RedisClock
from ..recovery.store.keys import SwarmKeys
from ..swarm import SwarmSpec
from . import conditions, specstatus
from .building.pods import DOMAIN, Owner
from .building.rootvolume import probe_refusal
from .client import KubeClient, follow_kubeconfig_env
from .config import OperatorConfig, connect_redis
from .crd import GROUP, PLURAL, VERSION
from .errors import AccessDenied, ApiError, InvalidSwarm, NoCredentials
from .launcher import KubernetesLauncher
from .leftovers import RedisLeftovers
from .observing import podcache
from .pipeline import Lane, Pipeline
from .placement import Placement, Timing
from .swarmpass import CLOSE_WAIT_S, SwarmPass
from .throttle import ClientLimits

log = logging.getLogger(__name__)
SWARM_LABEL = f"{DOMAIN}/swarm"


def parse_spec(raw: Any) -> SwarmSpec:
    """The Swarm spec, or :class:`InvalidSwarm` naming every wrong field."""
    try:
        return SwarmSpec.model_validate(dict(raw or {}))
    except ValidationError as e:
        parts = [f"{'.'.join(map(str, err['loc'])) or 'spec'}: {err['msg']}" for err in e.errors()]
        raise InvalidSwarm("invalid Swarm spec: " + "; ".join(parts)) from e


@kopf.on.login()
def login(settings: kopf.OperatorSettings, logger: Any, **_: Any) -> Any:
    """kopf logs in through the ``kubernetes`` package, as the operator's own client does (any kubeconfig)."""
    follow_kubeconfig_env()
    return kopf.login_via_client(logger=logger, settings=settings)


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config: OperatorConfig = memo.get("config") or OperatorConfig()
    memo["config"] = config
    settings.scanning.disabled = not config.scan_namespaces
    settings.persistence.finalizer = f"{DOMAIN}/operator"
    settings.posting.level = logging.WARNING
    if memo.get("redis") is None:
        memo["redis"] = connect_redis(config)
    _refuse_unmigrated(memo["redis"], config.swarm_key_prefix)
    if memo.get("kube") is None:
        try:
            memo["kube"] = KubeClient.from_environment(
                agent=f"agentihooks-operator/{config.operator_id}",
                limits=ClientLimits(config.kube_qps, config.kube_burst, config.kube_connections),
            )
        except NoCredentials as e:
            raise kopf.LoginError(str(e)) from e
    if memo.get("clock") is None:
        memo["clock"] = RedisClock(memo["redis"])
    if memo.get("catalog") is None:
        store = store_from_env(os.environ)
        memo["catalog"] = store if store is not None else EmptyCatalog()
    if config.placement and memo.get("placement") is None:
        memo["placement"] = _start_placement(memo, config)
    memo.setdefault("triggers", {})
    memo.setdefault("pipeline", Pipeline())  # made here: kopf copies the memo per object
    memo.setdefault("podcaches", {})  # kopf copies the memo per object: this dict is shared by all
    memo.setdefault("results", {})
    memo.setdefault("passes", {})
    memo.setdefault("refusals", {})
    log.info("operator %s started", config.operator_id)


def _refuse_unmigrated(client: redis.Redis, prefix: str) -> None:
    """Stop the operator (with the command to run) while swarms remain under name-only keys; a Redis
    that does not answer yet is retried, never skipped."""
    try:
        names = layout.unmigrated(client, prefix)
    except redis.RedisError as e:
        raise kopf.TemporaryError(f"cannot check the Redis keyspace's layout yet: {e}", delay=2) from e
    if names:
        message = layout.refusal(names, prefix)
        log.error("%s", message)
        raise kopf.PermanentError(message)


def _start_placement(memo: kopf.Memo, config: OperatorConfig) -> Placement:
    timing = Timing.of(config.heartbeat_seconds, config.placement_hold_seconds, config.lease_ms)
    placement = Placement(
        memo["redis"], config.swarm_key_prefix, config.operator_id, timing, stopping=_stopping_flag(memo)
    )
    return placement.start()


@kopf.on.cleanup()
def cleanup(memo: kopf.Memo, **_: Any) -> None:
    if memo.get("placement") is not None:  # leave the live set: the others re-rank at once
        memo["placement"].close()
    if memo.get("pipeline") is not None:  # event-driven recoveries in flight finish with the clients
        memo["pipeline"].close()
    # One budget for all swarms (they wind down side by side), so many swarms do not add up past the
    # Pod's grace period: the passes in flight end, then the clients close under nothing.
    deadline = time.monotonic() + CLOSE_WAIT_S + 5.0
    for thread in list(memo.get("winding") or []):  # stopped daemons still releasing with the clients
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    for held in list((memo.get("passes") or {}).values()):
        held.close(wait_s=max(0.0, deadline - time.monotonic()))
        _release(held)  # a clean stop hands every swarm to another replica at once
    for name in ("kube", "redis"):
        client = memo.get(name)
        if client is not None:
            client.close()


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def validate(*, spec: Any, meta: Any, name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    namespace = namespace or "default"
    with logs.about_swarm(namespace, name, (meta or {}).get("uid")):
        await _validate(spec=spec, meta=meta, name=name, namespace=namespace, memo=memo)


async def _validate(*, spec: Any, meta: Any, name: str, namespace: str, memo: Any) -> None:
    kube: KubeClient = memo["kube"]
    generation = (meta or {}).get("generation")
    generation = generation if isinstance(generation, int) else None
    try:
        parsed = parse_spec(spec)
    except InvalidSwarm as e:
        await _put(kube, namespace, name, specstatus.invalid(str(e)), generation=generation, observed=True)
        await asyncio.to_thread(
            functools.partial(specstatus.post_invalid, memo, kube, namespace, name, meta=meta, message=str(e))
        )
        raise kopf.PermanentError(f"swarm {namespace}/{name}: {e}") from e
    unheld = probe_refusal(parsed, namespace, name)
    # Ready=Unknown only where no pass has said anything yet, or over the invalid spec now fixed.
    await _put(
        kube,
        namespace,
        name,
        specstatus.valid(unheld, generation),
        generation=generation,
        only_over={conditions.READY: {specstatus.INVALID}},
    )
    if unheld is not None:
        log.warning("swarm %s/%s: %s", namespace, name, unheld)


async def _put(
    kube: KubeClient,
    namespace: str,
    name: str,
    verdicts: list[conditions.Verdict],
    *,
    generation: int | None,
    only_over: Mapping[str, set[str] | None] | None = None,
    observed: bool = False,
) -> None:
    try:
        await asyncio.to_thread(
            functools.partial(
                conditions.put,
                kube,
                namespace,
                name,
                verdicts,
                generation=generation,
                only_over=only_over,
                observed=observed,
            )
        )
    except ApiError as e:
        raise kopf.TemporaryError(
            f"could not report the conditions of {namespace}/{name}: {e}", delay=2
        ) from e


@kopf.on.event("pods", labels={SWARM_LABEL: kopf.PRESENT})
async def pod_changed(
    labels: Mapping[str, str], namespace: str | None, memo: Any, event: Mapping[str, Any], **_: Any
) -> None:
    """Runs on kopf's event loop (no thread hop): a failure the Pod alone shows starts its attempt's
    recovery at once (:mod:`.pipeline`, which wakes the daemon when done); any other change wakes it now."""
    podcache.feed(memo, namespace, labels.get(SWARM_LABEL), event)  # the pass reads changed Pods only
    key = (namespace or "default", labels.get(SWARM_LABEL) or "")
    pipeline: Pipeline | None = memo.get("pipeline")
    if (
        pipeline is not None
        and event.get("type") != "DELETED"
        and pipeline.offer(key, event.get("object") or {})
    ):
        return
    if pipeline is not None and pipeline.defer(key):
        return  # the swarm's recoveries in flight wake its daemon when the last one ends
    trigger: asyncio.Event | None = memo["triggers"].get((namespace, labels.get(SWARM_LABEL)))
    if trigger is not None:
        trigger.set()


def secret_token(kube: KubeClient, namespace: str) -> Callable[[str], str | None]:
    """Reads the ``token`` key of a Secret in ``namespace`` (the broker credential); never logged."""

    def read(name: str) -> str | None:
        try:
            obj = kube.get("secrets", namespace, name)
        except ApiError as e:
            log.warning("the account broker's credential Secret %s cannot be read (%s)", name, e.status)
            return None
        data = (obj or {}).get("data") or {}
        try:
            token = base64.b64decode(data["token"]).decode("utf-8").strip() if data.get("token") else None
        except (binascii.Error, UnicodeDecodeError):
            token = None
        if not token:
            log.warning("the account broker's credential Secret %s has no usable token key", name)
        return token or None

    return read


def _build_pass(memo: kopf.Memo, name: str, namespace: str, uid: str | None, body: Any) -> SwarmPass:
    config: OperatorConfig = memo["config"]
    owner = Owner(name=name, namespace=namespace, uid=uid, controller=config.operator_id)

    def current_spec() -> SwarmSpec:
        return parse_spec(body.get("spec"))

    keys = SwarmKeys(
        config.swarm_key_prefix, name, namespace
    )  # namespace/name: never shared across namespaces
    cache = podcache.register(memo, namespace, name)
    launcher = KubernetesLauncher(
        memo["kube"],
        owner,
        current_spec,
        control_url=config.control_url,
        leftovers=RedisLeftovers(memo["redis"], keys),
        faults=memo.get("faults"),
        policy=config.template_policy,
        seen_deleted=cache.was_deleted,
    )
    metrics = instruments.of(memo)
    metrics.ensure_swarm(SwarmId(namespace, name))  # its series exist at 0 before its first pass
    timed = TimedLauncher(launcher, metrics=metrics, client=memo["redis"], keys=keys, clock=memo["clock"])
    recovery = Recovery(
        memo["redis"],
        name,
        holder=config.operator_id,
        catalog=memo["catalog"],
        launcher=timed,
        prefix=config.swarm_key_prefix,
        lease_ms=config.lease_ms,
        clock=memo["clock"],
        faults=memo.get("faults"),
        brokers=HttpBrokers(secret_token(memo["kube"], namespace)),
        namespace=namespace,
        # One count per Swarm for the process's life: a rebuilt pass (a restarted daemon) keeps adding
        # to it, so a replica that keeps taking the lease again shows in its takeover counter.
        churn=memo.setdefault("lease_churn", {}).setdefault(SwarmId(namespace, name), LeaseChurn()),
    )
    runner = SwarmPass(
        recovery=recovery,
        redis_client=memo["redis"],
        keys=keys,
        kube=memo["kube"],
        owner=owner,
        clock=memo["clock"],
        node_lost_after_s=config.node_lost_after_seconds,
        closing=launcher.close,
        lease_ms=config.lease_ms,
        cleanup=launcher.clean_leftovers,
        refusals=launcher.take_refusals,
        stopping=_stopping_flag(memo),
        placed=_placed(memo, namespace, name),
        pod_cache=cache,
    )
    launcher.guard = runner.keepalive
    return runner


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10)
async def recovery_loop(
    *, name: str, namespace: str | None, uid: str, body: Any, memo: Any, stopped: Any, **_: Any
) -> None:
    namespace = namespace or "default"
    key = (namespace, name)
    trigger: asyncio.Event = memo["triggers"].setdefault(key, asyncio.Event())
    with logs.about_swarm(namespace, name, uid):  # every line of its passes names the Swarm
        try:
            await _loop(
                name=name,
                namespace=namespace,
                uid=uid,
                body=body,
                memo=memo,
                stopped=stopped,
                trigger=trigger,
                key=key,
            )
        finally:
            if memo.get("pipeline") is not None:
                memo["pipeline"].unregister(key)
            held: SwarmPass | None = memo["passes"].get(key)
            if held is not None:
                # Shutting down or the Swarm is gone: let another replica take over at once. kopf
                # cancels a deleted Swarm's daemon right after signalling it; an await of the executor
                # here was cancelled with it (a queued call is dropped), so the lease stayed held until
                # its TTL. A thread of its own runs to the end whatever happens to this task.
                give_up = bool(stopped) or _stopping_flag(memo)()
                await _in_own_thread(memo, functools.partial(_wind_down, held, give_up), f"wind-down-{name}")


def _in_own_thread(memo: Any, call: Callable[[], None], name: str) -> asyncio.Future[None]:
    """Run ``call`` in a new thread (kept in the memo for ``cleanup``); the future ends with it, and
    cancelling the future stops nothing."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()

    def done() -> None:
        if not finished.done():
            finished.set_result(None)

    def run() -> None:
        try:
            call()
        finally:
            with contextlib.suppress(RuntimeError):  # the loop may be closed by then
                loop.call_soon_threadsafe(done)

    thread = threading.Thread(target=logs.carry(run), name=name)
    memo["winding"] = [t for t in memo.get("winding") or [] if t.is_alive()] + [thread]
    thread.start()
    return finished


def _wind_down(held: SwarmPass, give_up: bool) -> None:
    """Close the swarm's pass and, when ``give_up``, release its lease.

    At the operator's exit this may race the clean-up closing the clients; a release that fails
    then only leaves the lease to expire (its TTL), so it is one log line, not a thread's crash.
    """
    try:
        held.close()
        if give_up:
            _release(held)
    except (OSError, ValueError, AttributeError, redis.RedisError) as e:
        # AttributeError: redis-py's reader is gone when clean-up closed the connection mid-call.
        log.warning("winding down the pass of %s: %s", held.owner.name, e)


def _post_refusal(memo: Any, key: tuple[str, str], body: Any, message: str) -> None:
    """A ``Forbidden`` Warning Event on the Swarm, once per distinct refusal until a pass succeeds."""
    posted: dict[tuple[str, str], str] = memo.setdefault("refusals", {})
    if posted.get(key) != message:
        posted[key] = message
        kopf.warn(body, reason="Forbidden", message=message)


def _release(held: SwarmPass) -> None:
    try:
        held.recovery.give_up()
    except (redis.RedisError, RecoveryError, OSError, AttributeError) as e:
        # The clean-up may close the Redis connection under a wind-down still releasing (redis-py
        # then fails inside its reader): the lease is left to its TTL, one line, no traceback.
        log.warning("could not give up the lease of %s: %s", held.owner.name, e)


async def _loop(
    *,
    name: str,
    namespace: str,
    uid: str,
    body: Any,
    memo: Any,
    stopped: Any,
    trigger: asyncio.Event,
    key: tuple[str, str],
) -> None:
    config: OperatorConfig = memo["config"]
    runner: SwarmPass | None = None
    stopping = _stopping_flag(memo)
    parsed: tuple[int, SwarmSpec] | None = None
    while not stopped and not stopping():
        # Read before the spec: a Swarm updated in between is then observed at the older generation,
        # never claimed at a newer one than the spec the pass used.
        generation = (body.get("metadata") or {}).get("generation")
        try:
            # The spec is parsed once per generation (the API server bumps it on every spec change):
            # a pass of an unchanged Swarm of 50,000 seats validates nothing, and keeps the same spec
            # object, which the seat check then recognises (:class:`..recovery.steps.seats.Admitted`).
            if parsed is not None and isinstance(generation, int) and parsed[0] == generation:
                spec = parsed[1]
            else:
                spec = parse_spec(body.get("spec"))
                parsed = (generation, spec) if isinstance(generation, int) else None
        except InvalidSwarm:
            await stopped.wait(5)  # reported by ``validate``; nothing runs until the spec is fixed
            continue
        if runner is None:
            runner = memo["passes"][key] = _build_pass(memo, name, namespace, uid, body)
            _join_pipeline(memo, key, runner, body, trigger)
        trigger.clear()
        # A failed pass is retried by this same pass object: it keeps the lease it holds and its
        # epoch (a new object would take the lease again under a new epoch, forcing every replica's
        # full resync and hiding the churn from the takeover counter); the next pass lists in full.
        delay: float | None = None
        try:
            result = await asyncio.to_thread(
                runner.run, spec, generation if isinstance(generation, int) else None
            )
        except LeaseLost:
            result = None
        except AccessDenied as e:  # RBAC refused a call: say which, on the Swarm too; retry later
            _post_refusal(memo, key, body, str(e))
            log.warning("recovery pass of %s/%s failed: %s", namespace, name, e)
            await _say_ready(memo, key, body, conditions.ready(False, "Forbidden", str(e)), generation)
            delay = max(config.retry_delay_seconds, spec.recovery.pass_interval_seconds)
        except redis.RedisError as e:
            log.warning("recovery pass of %s/%s failed: %s", namespace, name, e)
            down = conditions.ready(False, "RedisUnavailable", f"Redis cannot be reached: {e}")
            await _say_ready(memo, key, body, down, generation)
            delay = config.retry_delay_seconds
        except (ApiError, RecoveryError) as e:
            log.warning("recovery pass of %s/%s failed: %s", namespace, name, e)
            delay = config.retry_delay_seconds
        except Exception:  # a bug must not park the swarm for kopf's default minute
            log.exception("recovery pass of %s/%s failed unexpectedly", namespace, name)
            delay = config.retry_delay_seconds
        if delay is not None:
            runner.after_failure()
            await stopped.wait(delay)
            continue
        if result is not None and result.leader and runner.last_pass_seconds is not None:
            instruments.of(memo).observe_pass(SwarmId(namespace, name), runner.last_pass_seconds)
        memo["results"][key] = result
        memo.setdefault("refusals", {}).pop(key, None)
        if result is not None and result.ready is not None:
            await _say_ready(memo, key, body, result.ready, generation)
        await _until_next_pass(runner, spec, trigger, stopped, stopping)


async def _say_ready(
    memo: Any, key: tuple[str, str], body: Any, verdict: conditions.Verdict, generation: Any
) -> None:
    """Write ``Ready`` when the live Swarm does not say it yet (one write per change, not per pass)."""
    generation = generation if isinstance(generation, int) else None
    if conditions.same(conditions.held_in(body).get(conditions.READY), verdict, generation):
        return
    namespace, name = key
    try:
        await asyncio.to_thread(
            conditions.put, memo["kube"], namespace, name, [verdict], generation=generation
        )
    except ApiError as e:  # the next pass tries again
        log.warning("could not write the Ready condition of %s/%s: %s", namespace, name, e)


def _join_pipeline(
    memo: Any, key: tuple[str, str], runner: SwarmPass, body: Any, trigger: asyncio.Event
) -> None:
    """Let the swarm's failed attempts be recovered from their Pod events (:mod:`.pipeline`)."""
    loop = asyncio.get_running_loop()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the operator has stopped
            loop.call_soon_threadsafe(trigger.set)

    lane = Lane(
        runner=runner, spec=lambda: parse_spec(body.get("spec")), wake=wake, stopping=_stopping_flag(memo)
    )
    pipeline: Pipeline | None = memo.get("pipeline")
    if pipeline is not None:
        pipeline.register(key, lane)


def _placed(memo: Any, namespace: str, name: str) -> Callable[[bool], bool]:
    """Whether the placement among replicas (``memo["placement"]``, if any) gives this replica the
    swarm; called with whether this replica holds its lease now."""
    placement = memo.get("placement")
    if placement is None:
        return lambda holding: True
    return functools.partial(placement.mine, namespace, name)


def _stopping_flag(memo: Any) -> Callable[[], bool]:
    """Whether this operator was told to stop (SIGTERM): from then on it takes no lease."""
    flag = memo.get("stopping")
    return (lambda: False) if flag is None else flag.is_set


async def _until_next_pass(
    runner: SwarmPass, spec: SwarmSpec, trigger: asyncio.Event, stopped: Any, stopping: Callable[[], bool]
) -> None:
    """Wait for a Pod event, the stop, or the pass interval; meanwhile renew the lease every third of
    its TTL, so a quiet swarm whose pass interval is longer than the lease never loses it."""
    loop = asyncio.get_running_loop()
    due = loop.time() + spec.recovery.pass_interval_seconds
    while not stopping():
        timeout = min(due - loop.time(), runner.renew_every_s)
        if timeout <= 0:
            return
        waiter = asyncio.ensure_future(trigger.wait())
        stopper = asyncio.ensure_future(stopped.wait())
        try:
            done, _ = await asyncio.wait({waiter, stopper}, timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            waiter.cancel()
            stopper.cancel()
        if done or loop.time() >= due:
            return
        held = bool(runner.recovery.epoch)
        try:
            if await asyncio.to_thread(runner.renew) and not held:
                return  # this replica just took the swarm (a takeover): its first pass runs now
        except (redis.RedisError, RecoveryError) as e:
            log.warning("could not renew the lease of %s: %s", runner.owner.name, e)

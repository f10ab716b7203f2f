"""The swarm's lease and epoch: which controller may write, and the fencing token it writes under.

``control-owner`` holds ``{owner, epoch, expires_at}`` with a PX TTL; taking it
over (free, expired, or left by a previous run of the same holder) increments
``control-epoch``. A controller renews only the epoch it acquired, so a
restarted process with the same holder id gets a new epoch and the old
process, if it still runs, is refused at its next write.

The takeover and loss counts live in a :class:`LeaseChurn` the caller may keep
across :class:`Lease` instances: the operator builds a new pass (and lease) for
a Swarm when its daemon restarts, and a count that restarted with it would hide
exactly the churn the alert looks for.

Each instance writes an ``incarnation`` (random, its own) into the record it
takes. When a take's answer is lost (the connection dropped after the script
ran, a ``WAIT`` that timed out, a Sentinel failover), the instance still holds
epoch 0; its next take finds its own incarnation in the record and adopts
that epoch instead of burning another one. Without it every lost answer moved
the epoch once more with no takeover counted (found by the fault campaign,
tests/testsupport/chaos). Another instance of the same holder (a restart) has
another incarnation and still takes a new epoch.

A take whose answer is lost may still have moved the epoch, and its record can
expire before the next take adopts it. So the takeover is counted as soon as
the epoch is known to have moved (a take the replicas did not confirm answers
with what the primary did), and a take with no answer at all says in its log
line that the epoch may have moved: the churn count never trails the epoch
for a reason nobody wrote down.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid

import redis
from redis.sentinel import MasterNotFoundError

from .store.durable import NotReplicated, run_script
from .store.lua import LEASE, RELEASE_LEASE
from .store.records import ControlOwner
from .store.writer import Writer

log = logging.getLogger("agentihooks.recovery")


class LeaseChurn:
    """How often one process took a swarm's lease with a new epoch, and lost one it held."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.taken = 0
        self.lost = 0

    def took(self) -> None:
        with self._lock:
            self.taken += 1

    def lose(self) -> None:
        with self._lock:
            self.lost += 1


class Lease:
    def __init__(self, writer: Writer, lease_ms: int, churn: LeaseChurn | None = None) -> None:
        if lease_ms < 100:
            raise ValueError("lease_ms must be at least 100")
        self.w = writer
        self.lease_ms = lease_ms
        self._acquire = writer.client.register_script(LEASE)
        self._release = writer.client.register_script(RELEASE_LEASE)
        #: Times the lease was taken with a new epoch, and lost while held (this process only: a sum
        #: over replicas is the swarm's lease churn); shared with earlier instances when given.
        self.churn = churn if churn is not None else LeaseChurn()
        #: Set by :meth:`retire`: this instance never takes the lease again.
        self.retired = False
        #: Written into the record this instance takes: its own take, whose answer it lost, is adopted.
        self.incarnation = uuid.uuid4().hex
        #: Serialises a take or renewal with the retirement: a renewal already past the latch when
        #: the wind-down deletes the record would otherwise find it gone and take a new epoch.
        self._guard = threading.RLock()
        #: The last epoch counted as taken: adopting it after a lost answer is not another takeover.
        self._counted = 0

    def acquire(self) -> bool:
        with self._guard:
            return self._acquire_once()

    def _acquire_once(self) -> bool:
        if self.retired:  # a pass still running after the wind-down must not take the lease back
            self.w.epoch = 0
            return False
        keys = [self.w.keys.control_owner, self.w.keys.control_epoch]
        w = self.w
        args: list[str | int] = [w.holder, w.epoch, self.lease_ms, w.now_arg(), self.incarnation]
        self.w.trip()
        try:
            answer = json.loads(
                run_script(self.w.client, self._acquire, keys, args, mark=self.w.keys.wait_mark)
            )
        except NotReplicated as e:  # it ran on the primary: a new epoch it took is counted now
            self.w.epoch = 0
            if isinstance(e.answer, (str, bytes)):
                self._count_unconfirmed(json.loads(e.answer))
            raise
        except MasterNotFoundError:  # Sentinel named no primary: nothing was sent
            self.w.epoch = 0
            raise
        except redis.RedisError as e:  # no answer: the script may have run, and moved the epoch
            self.w.epoch = 0
            log.warning(
                "recovery of swarm %s: %s's take of the lease got no answer (%s); the epoch may have moved",
                self.w.keys.label,
                self.w.holder,
                type(e).__name__,
            )
            raise
        state = answer["state"]
        if state == "held":
            if self.w.epoch:
                self.churn.lose()
                log.warning(
                    "recovery of swarm %s: %s lost the lease to %s (epoch %s); it changes nothing now",
                    self.w.keys.label,
                    self.w.holder,
                    answer.get("owner"),
                    answer.get("epoch"),
                )
            self.w.epoch = 0
            return False
        if state == "acquired" and int(answer["epoch"]) != self._counted:
            self._took(int(answer["epoch"]), "")
        elif state == "acquired":  # the unconfirmed take, adopted: held now, counted already
            log.info(
                "recovery of swarm %s: %s took the lease at epoch %s (now confirmed)",
                self.w.keys.label,
                self.w.holder,
                answer["epoch"],
            )
        self.w.epoch = int(answer["epoch"])
        return True

    def _count_unconfirmed(self, answer: dict[str, object]) -> None:
        """A take the replicas did not confirm: its new epoch is counted (and adopted, uncounted, by
        the next take while the record lasts); it is not held until a take is confirmed."""
        if answer.get("state") == "acquired" and not answer.get("adopted"):
            self._took(int(str(answer["epoch"])), " (not yet confirmed by the replicas)")

    def _took(self, epoch: int, note: str) -> None:
        self._counted = epoch
        self.churn.took()
        log.info(
            "recovery of swarm %s: %s took the lease at epoch %s%s",
            self.w.keys.label,
            self.w.holder,
            epoch,
            note,
        )

    def release(self) -> bool:
        """Give the lease up (clean shutdown); another controller may take it at once."""
        with self._guard:
            return self._release_once()

    def _release_once(self) -> bool:
        if not self.w.epoch:
            return False
        keys = [self.w.keys.control_owner]
        self.w.trip()
        done = bool(
            run_script(
                self.w.client, self._release, keys, [self.w.holder, self.w.epoch], mark=self.w.keys.wait_mark
            )
        )
        self.w.epoch = 0
        return done

    def retire(self) -> bool:
        """Give the lease up for good: a later :meth:`acquire` of this instance is refused.

        The wind-down of a stopping operator releases the lease while a pass may still be running
        in its thread; without the latch that pass's next renewal would take the lease again, with
        a new epoch, and keep it until its TTL ran out.
        """
        with self._guard:
            self.retired = True
            return self._release_once()

    def owner(self) -> ControlOwner | None:
        self.w.trip()
        raw = self.w.client.get(self.w.keys.control_owner)
        return ControlOwner.model_validate_json(raw) if raw else None

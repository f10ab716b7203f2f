"""How the campaign reads the replicas' lease takes: an epoch number taken again after a failover lost
its first take is not "held confirmed" (a CI run of seed 3 flagged that fall back as a violation)."""

from __future__ import annotations

from testsupport.chaos.campaign import takes_of


def took(replica: str, swarm: str, epoch: int, how: str = "") -> str:
    head = f"INFO:agentihooks.recovery:recovery of swarm ns-1/{swarm}"
    return f"{head}: {replica} took the lease at epoch {epoch}{how}"


UNCONFIRMED = " (not yet confirmed by the replicas)"
LATER = " (now confirmed)"


def test_an_epoch_taken_again_after_its_unconfirmed_take_was_lost_is_not_held_confirmed() -> None:
    r0 = "\n".join([took("replica-0", "cw2", 1), took("replica-0", "cw2", 2, UNCONFIRMED)])
    r2 = "\n".join([took("replica-2", "cw2", 2, UNCONFIRMED), took("replica-2", "cw2", 2, LATER)])
    counted, held = takes_of([r0, r2])
    assert counted == {"cw2": {1, 2}}
    assert ("cw2", 1) in held and ("cw2", 2) not in held


def test_the_same_replica_taking_an_epoch_twice_counts_two_takes() -> None:
    log = "\n".join(
        [
            took("replica-2", "cw1", 2, UNCONFIRMED),
            took("replica-2", "cw1", 2, UNCONFIRMED),
            took("replica-2", "cw1", 2, LATER),
        ]
    )
    assert ("cw1", 2) not in takes_of([log])[1]  # the first take stayed unconfirmed


def test_a_take_confirmed_later_or_at_once_is_held_confirmed() -> None:
    log = "\n".join(
        [
            took("replica-1", "cw0", 3, UNCONFIRMED),
            took("replica-1", "cw0", 3, LATER),
            took("replica-1", "cw0", 4),
        ]
    )
    counted, held = takes_of([log, "unrelated line"])
    assert counted == {"cw0": {3, 4}} and held == {("cw0", 3), ("cw0", 4)}

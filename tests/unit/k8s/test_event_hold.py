"""Events queued by earlier passes are held while a pass runs, then sent in order, each exactly once.

The poster checks before every single post, so a notice whose first Event was
already in flight when a pass started sends its second one only after the pass.
Fakes stand in for the Kubernetes client and the recovery core (edges only).
"""

from __future__ import annotations

import threading
import time

from agentihooks_operator.k8s.events import Notice
from testsupport.eventposting import SPEC, BlockedRecovery, FakeKube, runner_for


def test_posts_wait_for_the_running_pass_then_flush_in_order_once() -> None:
    kube, recovery = FakeKube(), BlockedRecovery()
    runner = runner_for(kube, recovery)
    runner._post(Notice("Fenced", "a", execution_id="exe-1"))  # two Events: on the Swarm and the Pod
    runner._post(Notice("Replaced", "b", execution_id="exe-2"))
    runner._post(Notice("RequestRefused", "c"))
    assert kube.first_in_flight.wait(10)

    passing = threading.Thread(target=runner.run, args=(SPEC,))
    passing.start()
    assert recovery.entered.wait(10)  # the pass is running now
    kube.finish_first.set()  # the post already in flight completes...
    time.sleep(0.3)
    with kube.lock:
        assert kube.posted == [("Fenced", "Swarm")]  # ...and nothing else is sent during the pass

    recovery.release.set()
    passing.join(10)
    runner.close()
    assert kube.posted == [
        ("Fenced", "Swarm"),
        ("Fenced", "Pod"),
        ("Replaced", "Swarm"),
        ("Replaced", "Pod"),
        ("RequestRefused", "Swarm"),
    ]

"""The Kubernetes :class:`ReplacementLauncher`: one attempt = its Secret (credential + launch record) + Pod.

Every create is idempotent by name: the execution id is fixed in Redis before
``launch`` is called, so a repeated create answers 409 and is read as
``exists``, never a second Pod. A first launch sends the Secret and the Pod
at once: a kubelet does not start a Pod before the Secret it mounts exists
(it stays ``ContainerCreating``), so no order is needed and the launch costs
one API round trip and two writes. A crash may then leave a Pod without its
Secret, so a launch counts as done (``launched``) only when both exist. A
resumed launch (``plan.resumed``: the core minted a new credential) writes
the Secret first (updating one a crashed launch left to the new credential
and record), then creates the Pod only if it is absent, so the Pod never
starts with the old credential. ``retire`` deletes the fenced attempt's Pod
only, after noting the attempt in the swarm's leftovers ledger;
``clean_leftovers`` (run by the pass after its launches) deletes the noted
attempts' Secrets. An absent object is already retired.

Attempts launched by the release before this one carry their launch record
in a ConfigMap ``swarm-<execution_id>-launch``; their Pods run on unchanged
after an upgrade (the worker reads the same file). The first cleaning of a
process lists the swarm's launch ConfigMaps once, and the ConfigMap of such
an attempt is deleted with its Secret when it is retired.

Before anything of an attempt is created, the seat's provider credential Secret is read
(:mod:`.provider`); its recognised keys are copied into the attempt's own credential Secret, which
the worker Pod references. A missing or unusable Secret, or a Pod the API server's admission refuses
(Pod Security, quota), raises :class:`~..recovery.errors.LaunchBlocked`: the core keeps the launch
``unknown`` with that reason, which the seat's card and a ``LaunchBlocked`` Event show, and sends it
again after a wait that grows with each refusal (:mod:`..recovery.steps.launchwait`).
The Pod is built from ``spec.podTemplate`` under the operator's fields
(:mod:`.podtemplate`); template values the operator's overrode are named in a ``PodTemplateIgnored``
Warning Event.

A call the operator's RBAC refuses (403) is noted before it is re-raised: the
recovery core only logs a failed step and retries it next pass, so the pass
reads the notes (:meth:`take_refusals`) and reports them by name. A refused
create of the launch is also :class:`LaunchBlocked` (reason ``rbac``), so the
seat's card names it rather than reading ``bound`` beside no Pod.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal

from ..logs import about_attempt, carry
from ..recovery.errors import LaunchBlocked
from ..recovery.models import LaunchPlan
from ..swarm import SwarmSpec
from .building import restricted
from .building.borrowing import checkpoint_claim_refusal
from .building.podpolicy import TemplatePolicy, refusals
from .building.pods import (
    Execution,
    Owner,
    build_launch_record,
    build_worker_pod,
    build_worker_secret,
    credential_secret_name,
    label,
    launch_configmap_name,
    pod_name,
    seat_of,
)
from .building.provider import ProviderCredential, ProviderCredentialError
from .building.provider import read as read_provider
from .building.rootvolume import root_refusal
from .client import KubeClient, describe_refusal
from .errors import ApiError
from .events import Notice, events_for
from .leftovers import Leftovers, MemoryLeftovers

log = logging.getLogger(__name__)


def execution_of(plan: LaunchPlan) -> Execution:
    from agentihooks_checkpoint.launch import RestoreSource

    source = (
        RestoreSource(
            execution_id=plan.restore_from.execution_id,
            execution_generation=plan.restore_from.execution_generation,
        )
        if plan.restore_from
        else None
    )
    return Execution(
        execution_id=plan.execution_id,
        generation=plan.generation,
        seat=plan.seat,
        task_id=plan.task_id,
        task_generation=plan.task_generation,
        grant_id=plan.grant_id,
        controller_epoch=plan.epoch,
        directive=plan.directive,
        restore_from=source,
        store_namespace=plan.store_namespace,
        worker_lease_seconds=plan.worker_lease_ms / 1000 if plan.worker_lease_ms else None,
    )


class KubernetesLauncher:
    """Launches and retires one swarm's attempts in its namespace."""

    def __init__(
        self,
        kube: KubeClient,
        owner: Owner,
        spec: Callable[[], SwarmSpec],
        *,
        control_url: str | None = None,
        on_launch: Callable[[LaunchPlan, str], None] | None = None,
        leftovers: Leftovers | None = None,
        faults: Callable[[str], None] | None = None,
        policy: TemplatePolicy | None = None,
        seen_deleted: Callable[[str], bool] | None = None,
    ) -> None:
        self.kube = kube
        #: Whether the swarm's Pod watch saw the Pod of this name exist and then go (its Pod cache).
        self._seen_deleted = seen_deleted
        #: What a Pod template may ask for (:mod:`.podpolicy`); the strict default allows no account.
        self.policy = policy if policy is not None else TemplatePolicy()
        self.owner = owner
        self._spec = spec
        self.control_url = control_url
        self._on_launch = on_launch
        self.leftovers: Leftovers = leftovers if leftovers is not None else MemoryLeftovers()
        self._faults = faults
        #: Called before every call the recovery core makes (the pass renews its lease there).
        self.guard: Callable[[], None] = lambda: None
        #: The Secret create beside each Pod create, and the leftovers' deletes.
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix=f"launch-{owner.name}")
        #: Texts of the ``PodTemplateIgnored`` Events already posted by this process.
        self._ignored_seen: set[str] = set()
        self._refused: list[ApiError] = []
        self._refused_lock = threading.Lock()
        #: Attempts of earlier releases with a launch ConfigMap still to delete (listed at first need).
        self._old_launches: set[str] | None = None

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _note(self, error: ApiError) -> None:
        if error.status == 403:
            with self._refused_lock:
                self._refused.append(error)

    @contextlib.contextmanager
    def _noting(self) -> Iterator[None]:
        try:
            yield
        except ApiError as e:
            self._note(e)
            raise

    def take_refusals(self) -> list[ApiError]:
        """The calls refused with 403 since the last time this was asked (oldest first)."""
        with self._refused_lock:
            out, self._refused = self._refused, []
        return out

    def _create(self, resource: str, body: dict[str, Any]) -> Literal["created", "exists"]:
        try:
            self.kube.create(resource, self.owner.namespace, body)
        except ApiError as e:
            if e.status == 409:
                return "exists"
            raise
        return "created"

    def launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        """Create the attempt's Secret and Pod. A create the operator's RBAC refuses is noted
        (the pass reports it) and is also :class:`LaunchBlocked`: the seat's card and Event say the
        launch waits, instead of a decision that reads ``bound`` beside no Pod."""
        self.guard()
        # lines about this launch name the attempt launched (not the fenced one a pass is about)
        with self._noting(), about_attempt(plan.execution_id, plan.seat):
            try:
                return self._launch(plan)
            except ApiError as e:
                if not _rbac(e):
                    raise
                self._note(e)
                raise LaunchBlocked(
                    f"{describe_refusal(e)}; the launch is sent again, less often each time, until allowed",
                    reason="rbac",
                ) from e

    def _launch(self, plan: LaunchPlan) -> Literal["created", "exists"]:
        spec = self._spec()
        ex = execution_of(plan)
        self._check_template(spec)  # before anything of the attempt is created or read
        provider = self._provider(spec, ex.seat)
        record = build_launch_record(spec, self.owner, ex, control_url=self.control_url)
        secret = build_worker_secret(plan.worker_token.get_secret_value(), self.owner, ex, provider, record)
        pod, ignored = build_worker_pod(spec, self.owner, ex, provider)
        broken = restricted.violations(pod)
        if broken:  # whatever the namespace's Pod Security labels say (the chart sets none)
            raise LaunchBlocked(
                "the worker Pod would break the Pod Security restricted profile: "
                + "; ".join(broken)
                + "; nothing is launched until the Swarm's Pod template is fixed",
                reason="template",
            )
        unheld = root_refusal(spec, pod)
        if unheld is not None:
            raise LaunchBlocked(
                f"{unheld}; nothing is launched until it is fixed", reason="checkpoint_volume"
            )
        if ignored:
            self._template_ignored(ignored)
        if plan.resumed:
            self._put_secret(secret)
            absent = self.kube.get("pods", self.owner.namespace, pod["metadata"]["name"]) is None
            result: Literal["created", "exists"] = self._create_pod(pod) if absent else "exists"
        else:
            side: Future[Any] = self._pool.submit(carry(self._put_secret, secret))
            try:
                result = self._create_pod(pod)
            except LaunchBlocked:
                # No Pod was made: whatever became of the Secret, a resend reuses it (``_put_secret``).
                with contextlib.suppress(Exception):
                    side.result()
                raise
            except BaseException:
                side.result()
                raise
            side.result()
        log.info(
            "attempt %s (seat %s, generation %d): pod %s",
            plan.execution_id,
            plan.seat,
            plan.generation,
            result,
        )
        if self._on_launch is not None:
            self._on_launch(plan, result)
        return result

    def _put_secret(self, secret: dict[str, Any]) -> None:
        if self._create("secrets", secret) == "exists":
            # Left by a launch that crashed before its Pod: the core minted a new credential since.
            self.kube.patch(
                "secrets",
                self.owner.namespace,
                secret["metadata"]["name"],
                {
                    "stringData": secret["stringData"],
                    **({"data": secret["data"]} if "data" in secret else {}),
                },
            )

    def _check_template(self, spec: SwarmSpec) -> None:
        """:class:`LaunchBlocked` naming every field of the Pod template that lends the Swarm's author more
        than a Pod author has (:mod:`.podpolicy`), whatever admission let through; also when the Swarm
        lives in the operator's own namespace."""
        where = self.policy.namespace_refusal(self.owner.namespace)
        if where is not None:
            raise LaunchBlocked(f"{where}; nothing is launched there", reason="namespace")
        secrets, claims = self._secret_labels, self._claim_labels
        store = spec.checkpoint_store
        lent = checkpoint_claim_refusal(
            store.claim if store.root and not store.remote else None, claims, self.policy.claims
        )
        if lent is not None:
            raise LaunchBlocked(f"{lent}; nothing is launched until it is fixed", reason="template")
        if spec.pod_template is None:
            return
        template = spec.pod_template.model_dump(by_alias=True, exclude_none=True)
        refused = refusals(template, self.policy, self.owner.namespace, secrets, claims)
        if refused:
            raise LaunchBlocked(
                "the Swarm's Pod template is refused: " + "; ".join(refused) + "; nothing is launched "
                "until it is fixed",
                reason="template",
            )

    def _secret_labels(self, name: str) -> dict[str, str] | None:
        """A Secret's labels in the Swarm's namespace (None: there is none)."""
        return _labels_of(self.kube.get("secrets", self.owner.namespace, name))

    def _claim_labels(self, name: str) -> dict[str, str] | None:
        """A PersistentVolumeClaim's labels in the Swarm's namespace (None: there is none)."""
        return _labels_of(self.kube.get("persistentvolumeclaims", self.owner.namespace, name))

    def _provider(self, spec: SwarmSpec, seat: str) -> ProviderCredential | None:
        """The seat's provider credential, read now; :class:`LaunchBlocked` when it cannot be had (also
        when its owner did not lend it to Swarms: :mod:`.building.borrowing`)."""
        entry = seat_of(spec, seat)
        ref = spec.credentials_of(entry)
        if ref is None:
            return None
        path = f"seats[{seat}].credentials" if entry.credentials else "harness.credentials"
        try:
            return read_provider(
                self.kube,
                self.owner.namespace,
                ref.secret_name,
                spec.harness.name,
                path=path,
                listed=self.policy.secrets,
            )
        except ProviderCredentialError as e:
            raise LaunchBlocked(f"{e}; nothing is launched until it is fixed", reason="credential") from e

    def _create_pod(self, pod: dict[str, Any]) -> Literal["created", "exists"]:
        """Create the Pod; a refusal by admission (Pod Security, quota, validation) is :class:`LaunchBlocked`
        with the API server's words, and so is a create that certainly never reached the API server. An
        RBAC refusal stays an :class:`ApiError` (the pass reports it)."""
        try:
            return self._create("pods", pod)
        except ApiError as e:
            if e.status in (400, 403, 422) and not _rbac(e):
                said = e.message or e.reason
                raise LaunchBlocked(
                    f"the API server refused the worker Pod: {said}", reason="admission"
                ) from e
            if e.status in (0, 429) and not e.maybe_applied:
                # Certainly not created (no try reached the server, or each was throttled): the journal
                # says so, and the next pass sends the launch again instead of reading the Secret that
                # may have been created beside it as a sign that the Pod was made and lost.
                raise LaunchBlocked(
                    f"the API server could not be reached to create the worker Pod ({e.reason}); "
                    "nothing was created, the launch is sent again",
                    reason="api_unavailable",
                ) from e
            raise

    def _template_ignored(self, ignored: list[str]) -> None:
        """Name the template's overridden fields in a ``PodTemplateIgnored`` Warning Event (once per text)."""
        text = "; ".join(ignored)
        if text in self._ignored_seen:
            return
        self._ignored_seen.add(text)
        log.warning(
            "swarm %s/%s: the Pod template sets fields the operator owns; the operator's values are used: %s",
            self.owner.namespace,
            self.owner.name,
            text,
        )
        notice = Notice(
            "PodTemplateIgnored",
            f"the worker Pod template sets fields the operator owns; the operator's values are used: {text}",
            warning=True,
        )
        for event in events_for(
            notice, swarm=self.owner.name, namespace=self.owner.namespace, swarm_uid=self.owner.uid
        ):
            self._pool.submit(carry(self._post_event, event))

    def _post_event(self, event: dict[str, Any]) -> None:
        try:
            self.kube.create("events", self.owner.namespace, event)
        except ApiError as e:  # an Event is a courtesy; the Pod has the operator's values either way
            log.warning("could not post event %s: %s", event.get("reason"), e)

    def exists(self, execution_id: str) -> bool:
        self.guard()
        with self._noting():
            return self.kube.get("pods", self.owner.namespace, pod_name(execution_id)) is not None

    def launched(self, execution_id: str) -> bool:
        """Whether the attempt's Pod and its Secret both exist (read together)."""
        return self.launch_seen(execution_id) == "made"

    def launch_seen(self, execution_id: str) -> Literal["made", "secret", "pod", "none"]:
        """Which of the attempt's two objects exist, read together: both, its Secret alone (the
        launch reached the API server; its Pod is not there), its Pod alone, or neither."""
        self.guard()
        ns = self.owner.namespace
        with self._noting():
            secret = self._pool.submit(self.kube.get, "secrets", ns, credential_secret_name(execution_id))
            pod = self.kube.get("pods", ns, pod_name(execution_id)) is not None
            has_secret = secret.result() is not None
        if has_secret:
            return "made" if pod else "secret"
        return "pod" if pod else "none"

    def deleted(self, execution_id: str) -> bool:
        """Whether the attempt's Pod was created and has gone since, as this process's Pod watch saw
        it: the evidence that an absent Pod's launch took effect (:mod:`.podcache`)."""
        return self._seen_deleted is not None and self._seen_deleted(pod_name(execution_id))

    def retire(self, execution_id: str) -> None:
        """Delete the fenced attempt's Pod; its Secret waits for :meth:`clean_leftovers`."""
        self.guard()
        self.leftovers.note(execution_id)  # noted first: a crash after the Pod delete leaves a to-do
        with self._noting():
            self.kube.delete("pods", self.owner.namespace, pod_name(execution_id))

    def clean_leftovers(self) -> list[str]:
        """Delete the Secret (and an earlier release's launch ConfigMap) of every noted attempt; the
        ids whose objects are gone.

        An attempt stays noted when a delete fails, so a later pass tries again.
        """
        pending = self.leftovers.pending()
        if not pending:
            return []
        if self._faults is not None:
            self._faults("before:clean_leftovers")
        if self._old_launches is None:
            self._old_launches = self._launch_configmaps()
        futures = [(eid, self._pool.submit(carry(self._delete_leftovers, eid))) for eid in pending]
        cleaned: list[str] = []
        for eid, future in futures:
            try:
                future.result()
            except ApiError as e:
                self._note(e)
                log.warning("leftovers of attempt %s not deleted yet (%s); a later pass retries", eid, e)
                continue
            cleaned.append(eid)
        self.leftovers.done(cleaned)
        return cleaned

    def _delete_leftovers(self, execution_id: str) -> None:
        ns = self.owner.namespace
        self.kube.delete("secrets", ns, credential_secret_name(execution_id))
        old = self._old_launches
        if old is None or execution_id in old:  # None: the list was refused, so each is tried
            self.kube.delete("configmaps", ns, launch_configmap_name(execution_id))
            if old is not None:
                old.discard(execution_id)

    def _launch_configmaps(self) -> set[str] | None:
        """Execution ids of this swarm's launch ConfigMaps (earlier releases' attempts): one list per
        process; ``None`` when it cannot be had, and then every leftover's ConfigMap is deleted by name."""
        try:
            found = self.kube.list("configmaps", self.owner.namespace, {label("swarm"): self.owner.name})
        except ApiError as e:
            self._note(e)
            log.info(
                "launch ConfigMaps of swarm %s not listed (%s); each is deleted by name", self.owner.name, e
            )
            return None
        prefix, suffix = pod_name(""), "-launch"
        return {
            name.removeprefix(prefix).removesuffix(suffix)
            for cm in found
            if (name := str((cm.get("metadata") or {}).get("name") or "")).startswith(prefix)
            and name.endswith(suffix)
        }


def _rbac(error: ApiError) -> bool:
    """A refusal by the authorizer (``User ... cannot create resource ...``), not by admission or quota."""
    return error.status == 403 and "cannot " in error.message


def _labels_of(obj: dict[str, Any] | None) -> dict[str, str] | None:
    return None if obj is None else dict((obj.get("metadata") or {}).get("labels") or {})

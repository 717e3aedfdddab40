"""Kafka's auto leader rebalance task, on the driver.

Kafka's controller schedules ``AutoPreferredReplicaLeaderElection`` 5 seconds after it becomes active and
``leader.imbalance.check.interval.seconds`` after each run; a run, when ``auto.leader.rebalance.enable``,
computes per broker the share of the partitions it is the preferred replica of that another broker leads,
and elects the preferred leaders of the brokers above ``leader.imbalance.per.broker.percentage``.

Here each bucket counts its own partitions (:func:`core.controller.imbalance`, in its metrics row), the
driver sums the buckets' latest counts (:attr:`streaming.query.dispatch.Dispatcher.imbalance`) and
:class:`AutoRebalanceScheduler` publishes :class:`core.events.AutoRebalanceTick` naming the brokers above
the threshold to the broker-events topic; each bucket then elects the preferred leaders of its partitions
of those brokers whose preferred replica can lead (:func:`core.controller.elections.auto_rebalance`).
Reassignments in progress do not stop a run, as in Kafka 3.9's controller (releases before 3.4 skipped
every candidate while any partition was being reassigned). The configs come from the settings and
``/config/brokers/<default>`` (:mod:`streaming.zk.admin_watch` calls :meth:`AutoRebalanceScheduler.update`).

Gentle leader balance (livectl's ``leader.imbalance.max.leaders.per.interval``, :mod:`core.leader_balance`):
each run plans its pass from the buckets' latest reports of their movable partitions
(:attr:`streaming.query.dispatch.Dispatcher.leader_move_reports`) and, when bounded, the tick carries each
bucket's share of the bound. A run also drains an ``elect-leaders --all`` queued under the bound, with auto
rebalance off too; :meth:`AutoRebalanceScheduler.wake` runs it early when one is queued, but never sooner than
one interval after the previous pass. :meth:`AutoRebalanceScheduler.pending` is the plan now: the moves left,
for the metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kafka.errors import KafkaError

from core.cluster_config import CONTROLLER_CONFIGS, controller_fields
from core.codec.events import event_to_json
from core.events import AutoRebalanceTick
from core.leader_balance import LeaderMovePlan, plan_leader_moves
from streaming.runtime.watch_thread import WatchThread
from streaming.zk.liveness import Producer

log = logging.getLogger(__name__)


def _fields(configs: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    values: dict[str, Any] = {f: default for f, _, default in CONTROLLER_CONFIGS.values()}
    values.update(controller_fields(configs))
    return values


class AutoRebalanceScheduler:
    """Publishes :class:`AutoRebalanceTick` on Kafka's schedule (see the module docstring)."""

    def __init__(
        self,
        producer: Producer,
        topic: str,
        imbalance: Callable[[], dict[int, tuple[int, int]]],
        configs: tuple[tuple[str, str], ...],
        *,
        leader_moves: Callable[[], tuple[dict[int, dict[int, int]], dict[int, bool]]] | None = None,
        first_delay_s: float = 5.0,
        flush_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._producer = producer
        self.topic = topic
        self._imbalance = imbalance
        self._leader_moves = leader_moves
        self._values = _fields(configs)
        self._flush_timeout = flush_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        #: when the last pass was published (the clock's time), ``None`` before the first
        self._last_pass: float | None = None
        #: the last round was a wake less than an interval after the last pass: it ran nothing
        self._held_back = False
        self._thread = WatchThread("livectl-auto-rebalance", self._round, self._delay, first_delay_s=first_delay_s)
        #: every tick published, in order
        self.published: list[AutoRebalanceTick] = []
        #: the plan of the last pass published (its moves), ``None`` before the first
        self.last_plan: LeaderMovePlan | None = None

    @property
    def interval_s(self) -> float:
        return float(self._values["leader_imbalance_check_interval_seconds"])

    @property
    def max_leaders(self) -> int:
        return int(self._values["leader_imbalance_max_leaders_per_interval"])

    def _delay(self) -> float:
        """The wait before the next run: the interval (Kafka's schedule), or, after a wake that came less than
        an interval after the last pass published, the rest of that interval."""
        if self._held_back and self._last_pass is not None:
            return max(0.05, self._last_pass + self.interval_s - self._clock())
        return self.interval_s

    def wake(self) -> None:
        """Run a pass soon (an ``elect-leaders --all`` was queued): now if the last pass is an interval old,
        else when it is."""
        self._thread.wake()

    def update(self, configs: tuple[tuple[str, str], ...]) -> None:
        """New effective configs; the next run, and the delay scheduled after it, use them (as Kafka)."""
        self._values = _fields(configs)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._thread.stop(timeout)

    def pending(self) -> LeaderMovePlan:
        """The pass that would run now, from the buckets' latest reports: its ``wanted`` is the
        preferred-leader moves left."""
        movable, queued = self._leader_moves() if self._leader_moves is not None else ({}, {})
        return plan_leader_moves(
            self._imbalance(),
            movable,
            queued,
            enabled=bool(self._values["auto_leader_rebalance_enable"]),
            percentage=int(self._values["leader_imbalance_per_broker_percentage"]),
            max_leaders=self.max_leaders,
        )

    def figures(self) -> tuple[int, int, int]:
        """For the metrics: (preferred-leader moves left, the bound per pass, the moves of the last pass)."""
        last = self.last_plan
        return self.pending().wanted, self.max_leaders, last.moves if last is not None else 0

    def check(self) -> AutoRebalanceTick | None:
        """One run: the tick published, or ``None`` (auto rebalance off and nothing queued, or no broker
        above the threshold)."""
        plan = self.pending()
        if plan.empty:
            return None
        tick = AutoRebalanceTick(plan.brokers, bucket_limits=plan.bucket_limits or ())
        self._producer.send(self.topic, key=b"controller", value=event_to_json(tick).encode())
        self._producer.flush(timeout=self._flush_timeout)
        with self._lock:
            self.published.append(tick)
            self.last_plan = plan
        log.info(
            "leader balance: brokers %s are above the imbalance threshold; %d preferred leader moves wanted, "
            "%d in this pass",
            list(plan.brokers),
            plan.wanted,
            plan.moves,
        )
        return tick

    def _round(self) -> None:
        self._held_back = self._last_pass is not None and self._clock() < self._last_pass + self.interval_s
        if self._held_back:
            return  # woken early: the pass waits for the rest of its interval (_delay)
        try:
            if self.check() is not None:
                self._last_pass = self._clock()
        except (KafkaError, OSError) as e:
            log.warning("auto leader rebalance check failed, the next one is in %.0f s: %s", self.interval_s, e)

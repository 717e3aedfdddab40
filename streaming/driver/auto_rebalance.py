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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafka.errors import KafkaError

from core.cluster_config import CONTROLLER_CONFIGS, controller_fields
from core.codec.events import event_to_json
from core.controller import brokers_over_imbalance
from core.events import AutoRebalanceTick
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
        first_delay_s: float = 5.0,
        flush_timeout_s: float = 30.0,
    ) -> None:
        self._producer = producer
        self.topic = topic
        self._imbalance = imbalance
        self._values = _fields(configs)
        self._flush_timeout = flush_timeout_s
        self._thread = WatchThread(
            "livectl-auto-rebalance", self._round, lambda: self.interval_s, first_delay_s=first_delay_s
        )
        #: every tick published, in order
        self.published: list[AutoRebalanceTick] = []

    @property
    def interval_s(self) -> float:
        return float(self._values["leader_imbalance_check_interval_seconds"])

    def update(self, configs: tuple[tuple[str, str], ...]) -> None:
        """New effective configs; the next run, and the delay scheduled after it, use them (as Kafka)."""
        self._values = _fields(configs)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._thread.stop(timeout)

    def check(self) -> AutoRebalanceTick | None:
        """One run: the tick published, or ``None`` (auto rebalance off, or no broker above the
        threshold)."""
        if not self._values["auto_leader_rebalance_enable"]:
            return None
        brokers = brokers_over_imbalance(self._imbalance(), int(self._values["leader_imbalance_per_broker_percentage"]))
        if not brokers:
            return None
        tick = AutoRebalanceTick(brokers)
        self._producer.send(self.topic, key=b"controller", value=event_to_json(tick).encode())
        self._producer.flush(timeout=self._flush_timeout)
        self.published.append(tick)
        log.info("auto leader rebalance: brokers %s are above the imbalance threshold", list(brokers))
        return tick

    def _round(self) -> None:
        try:
            self.check()
        except (KafkaError, OSError) as e:
            log.warning("auto leader rebalance check failed, the next one is in %.0f s: %s", self.interval_s, e)

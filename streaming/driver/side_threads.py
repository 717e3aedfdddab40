"""The driver's threads beside the query, each feeding it events on ``livectl.broker-events``: the admin-path
watcher (:mod:`streaming.zk.admin_watch`, ZooKeeper-era tools' ``/admin`` paths and the controller configs), the
liveness bridge (:mod:`streaming.zk.liveness`, ``/brokers/ids`` → broker startup / modification / failure) and
the auto leader rebalance schedule (:mod:`streaming.driver.auto_rebalance`); and :class:`Opened`, what a run
opened, closed in order."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from core.controller import ControllerConfig
from core.snapshot import ZkSnapshot
from streaming.query.dispatch import Dispatcher
from streaming.settings import Settings

log = logging.getLogger(__name__)

#: how long stopping waits for the driver's producer to send what it holds
PRODUCER_CLOSE_TIMEOUT_S = 5.0


def admin_watcher(zk: Any, producer: Any, s: Settings, controller_epoch: int) -> Any:
    """The admin-path watcher of this controller (not started: it is primed with the failover snapshot first;
    its :meth:`read_configs` gives the controller configs the query's buckets start with)."""
    from streaming.zk.admin_watch import AdminPathWatcher

    return AdminPathWatcher(
        zk,
        producer,
        s.broker_events_topic,
        controller_epoch,
        s.controller_id,
        static_configs=s.controller_configs(),
    )


def controller_config_now(zk: Any, s: Settings) -> ControllerConfig:
    """The controller configs a query started now would run with: the settings' with ZooKeeper's dynamic ones,
    read as the admin-path watcher reads them at a controller's start (a watcher only for the read: it
    publishes nothing)."""
    return s.with_controller_configs(admin_watcher(zk, None, s, 0).read_configs()).controller_config()


def start_side_threads(
    zk: Any, producer: Any, s: Settings, *, watcher: Any, dispatcher: Dispatcher, snapshot: ZkSnapshot
) -> tuple[Any, Any]:
    """Start the liveness bridge, the admin-path watcher and the auto-rebalance scheduler (which follows
    the watcher's configs), after the failover reference is published; returns (bridge, scheduler)."""
    from streaming.driver.auto_rebalance import AutoRebalanceScheduler
    from streaming.zk.liveness import LivenessBridge

    # brokers already in the snapshot are known to every bucket: only changes are published (a registration
    # rewritten since the snapshot was read among them)
    bridge = LivenessBridge(zk, producer, s.broker_events_topic, known_brokers=snapshot.brokers)
    bridge.start()
    rebalancer = AutoRebalanceScheduler(
        producer,
        s.broker_events_topic,
        dispatcher.imbalance,
        watcher.configs,
        leader_moves=dispatcher.leader_move_reports,
    )
    watcher.on_configs = rebalancer.update
    dispatcher.on_leader_moves_queued = rebalancer.wake
    # the controller's own topic znode writes are not published back to it (AdminPathWatcher.expect)
    dispatcher.own_writes = watcher
    watcher.start()
    rebalancer.start()
    return bridge, rebalancer


def log_dirs_watch(s: Settings, client_config: dict[str, Any], observatory: Any) -> Any:
    """The status page's reader of the brokers' log sizes (``log_dirs_topic``), started."""
    from streaming.monitoring.log_dirs_watch import LogDirsWatch

    watch = LogDirsWatch(s.bootstrap_servers, s.log_dirs_topic, client_config).start()
    observatory.log_dirs = watch.reports
    return watch


@dataclass
class Opened:
    """What a controller's run opened besides its query, closed by :meth:`close` in this order: the session's
    query listeners it added, the threads that publish events, the request sink, the producer, then the lease
    and its ZooKeeper session (closing the session is what lets a standby take over)."""

    zk: Any
    lease: Any
    bridge: Any = None
    watcher: Any = None
    rebalancer: Any = None
    log_dirs: Any = None
    request_sink: Any = None
    producer: Any = None
    spark: Any = None
    listeners: list[Any] = field(default_factory=list)

    def close(self) -> None:
        # a later run in the same driver (the demo, a test session) adds its own; left here, every one of
        # them would be called back, through py4j, for every query event of every later run
        for listener in self.listeners:
            try:
                self.spark.streams.removeListener(listener)
            except Exception as e:  # a stopped session has no listeners left; the lease must still go
                log.warning("could not remove the query listener %s: %s", type(listener).__name__, e)
        self.listeners = []
        for thread in (self.bridge, self.watcher, self.rebalancer, self.log_dirs):
            if thread is not None:
                thread.stop()
        if self.request_sink is not None:
            try:
                self.request_sink.close()
            except Exception as e:  # Kafka away: the lease and the session must still go
                log.warning("could not close the request sink (%s): stopping anyway", e)
        if self.producer is not None:
            close_producer(self.producer, "the driver's producer")
        self.lease.release()
        self.zk.stop()
        self.zk.close()


def close_producer(producer: Any, what: str) -> None:
    """Close within :data:`PRODUCER_CLOSE_TIMEOUT_S`: events not yet sent when Kafka is away are dropped, not
    waited for (``delivery.timeout.ms``), and said. kafka-python raises from a close whose flush timed out;
    its sender thread is a daemon, left to die with the process."""
    from kafka.errors import KafkaError

    try:
        producer.close(timeout=PRODUCER_CLOSE_TIMEOUT_S)
    except KafkaError as e:
        log.warning("could not send what %s held within %g s (%s): stopping anyway", what, PRODUCER_CLOSE_TIMEOUT_S, e)

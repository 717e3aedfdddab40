"""Prometheus' view of the controller: :class:`ControllerCollector` turns a snapshot of it into Prometheus metric
families at scrape time, under the names Prometheus' JMX exporter gives Kafka's MBeans (its Kafka rules,
``lowercaseOutputName: true``): ``kafka.controller<type=KafkaController, name=X><>Value`` ->
``kafka_controller_kafkacontroller_x``; ``<type=ControllerStats, name=XPerSec><>Count`` ->
``kafka_controller_controllerstats_x_total``; a timer ``<type=ControllerStats, name=XRateAndTimeMs>`` ->
``…_xrateandtimems_count`` and ``…_xrateandtimems{quantile="0.50"}`` (milliseconds). livectl's own metrics are
``livectl_*``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from core.kafka.requests import RequestApi
from streaming.monitoring.observatory import KAFKA_GAUGES, Observatory, Role


def _jmx(kind: str, name: str) -> str:
    """The JMX exporter's name of a Kafka controller MBean value (lower case)."""
    return f"kafka_controller_{kind}_{name}".lower()


class ControllerCollector:
    """A ``prometheus_client`` collector: the observatory's figures, computed at every scrape."""

    def __init__(self, observatory: Observatory) -> None:
        self.observatory = observatory

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

        s = self.observatory.snapshot()
        for name in KAFKA_GAUGES:
            yield GaugeMetricFamily(
                _jmx("kafkacontroller", name), f"Kafka's KafkaController {name}", s.kafka_metrics[name]
            )
        yield CounterMetricFamily(
            _jmx("controllerstats", "UncleanLeaderElections"),
            "unclean leader elections (Kafka's ControllerStats UncleanLeaderElectionsPerSec)",
            s.unclean_leader_elections,
        )
        for timer, (count, total_ms, quantiles) in s.timers.items():
            name = _jmx("controllerstats", f"{timer}RateAndTimeMs")
            fam = SummaryMetricFamily(
                name,
                f"micro-batches that handled {timer} events and their duration in ms (Kafka's {timer}RateAndTimeMs)",
                count_value=count,
                sum_value=total_ms,
            )
            for q, v in quantiles:
                fam.add_sample(name, {"quantile": f"{q:g}"}, v)
            yield fam

        labels = ["controller_id"]
        cid = [str(s.controller_id)]
        epoch = GaugeMetricFamily(
            "livectl_controller_epoch", "the controller epoch this process holds (0: none)", labels=labels
        )
        epoch.add_metric(cid, s.controller_epoch)
        yield epoch
        role = GaugeMetricFamily(
            "livectl_controller_role", "1 for this process's role", labels=["controller_id", "role"]
        )
        for r in Role:
            role.add_metric([cid[0], r.value], 1 if r is s.role else 0)
        yield role
        yield GaugeMetricFamily("livectl_last_batch_id", "the last micro-batch carried out (-1: none)", s.last_batch_id)
        yield GaugeMetricFamily(
            "livectl_last_batch_timestamp_seconds",
            "when the last micro-batch was carried out (Unix time)",
            s.last_batch_time_s,
        )
        parts = GaugeMetricFamily(
            "livectl_last_batch_duration_seconds",
            "the last micro-batch's duration (micro_batch) and its parts as measured on the driver",
            labels=["part"],
        )
        for part, secs in sorted(s.last_batch_seconds.items()):
            parts.add_metric([part], secs)
        yield parts
        yield SummaryMetricFamily(
            "livectl_batch_duration_seconds",
            "micro-batch durations (the query's triggerExecution)",
            count_value=s.batches,
            sum_value=s.batch_seconds_total,
        )
        inputs = CounterMetricFamily("livectl_input_records", "input records by event type", labels=["type"])
        for t, n in sorted(s.input_by_type.items()):
            inputs.add_metric([t], n)
        yield inputs
        yield CounterMetricFamily(
            "livectl_rejected_records", "input records rejected (sent to the rejected topic)", s.rejected
        )
        decisions = CounterMetricFamily("livectl_decisions", "decisions carried out, by kind", labels=["kind"])
        for k in ("zookeeper", "request", "admin", "failure"):
            decisions.add_metric([k], s.decisions_by_kind.get(k, 0))
        yield decisions
        requests = CounterMetricFamily("livectl_broker_requests", "broker requests sent, by API", labels=["api"])
        for api in RequestApi:
            requests.add_metric([api.value], s.requests_by_api.get(api.value, 0))
        yield requests
        yield CounterMetricFamily(
            "livectl_leader_elections", "partitions whose leader the controller changed", s.leader_elections
        )
        c, f = s.cluster, s.figures
        yield GaugeMetricFamily(
            "livectl_reassignments_in_progress", "partitions being reassigned", f["ReassigningPartitions"]
        )
        # the figures of core.figures, as the CLI's filters and the status page count them
        yield GaugeMetricFamily(
            "livectl_under_replicated_partitions",
            "partitions with an ISR below their replication factor (kafka-topics --under-replicated-partitions)",
            f["UnderReplicatedPartitions"],
        )
        yield GaugeMetricFamily(
            "livectl_under_min_isr_partitions",
            "partitions without a live leader or with an ISR below min.insync.replicas "
            "(kafka-topics --under-min-isr-partitions)",
            f["UnderMinIsrPartitionCount"],
        )
        yield GaugeMetricFamily(
            "livectl_offline_partitions",
            "partitions in OfflinePartition state (Kafka's OfflinePartitionsCount)",
            f["OfflinePartitionsCount"],
        )
        states = GaugeMetricFamily("livectl_partitions", "partitions by state", labels=["state"])
        for st in ("NewPartition", "OnlinePartition", "OfflinePartition", "NonExistentPartition"):
            states.add_metric([st], c.partitions_by_state.get(st, 0))
        yield states
        leaders = GaugeMetricFamily("livectl_broker_leader_partitions", "partitions led, by broker", labels=["broker"])
        preferred = GaugeMetricFamily(
            "livectl_broker_preferred_partitions", "partitions whose preferred leader is the broker", labels=["broker"]
        )
        imbalance = GaugeMetricFamily(
            "livectl_broker_preferred_imbalance_ratio",
            "share of the broker's preferred partitions led by another broker",
            labels=["broker"],
        )
        brokers = sorted(set(c.leaders_by_broker) | set(c.preferred_by_broker) | set(s.live_brokers))
        for b in brokers:
            bad, total = c.preferred_by_broker.get(b, (0, 0))
            leaders.add_metric([str(b)], c.leaders_by_broker.get(b, 0))
            preferred.add_metric([str(b)], total)
            imbalance.add_metric([str(b)], bad / total if total else 0.0)
        yield leaders
        yield preferred
        yield imbalance
        cordoned = GaugeMetricFamily(
            "livectl_broker_cordoned",
            "1 for a cordoned broker (no new replica is placed on it: /livectl/cordoned_brokers), else 0",
            labels=["broker"],
        )
        for b in sorted(set(brokers) | set(s.cordoned_brokers)):
            cordoned.add_metric([str(b)], 1 if b in s.cordoned_brokers else 0)
        yield cordoned
        draining = GaugeMetricFamily(
            "livectl_broker_draining",
            "1 for a broker with a drain recorded (/livectl/drains/<N>: livectl brokers --drain), else 0",
            labels=["broker"],
        )
        replicas = GaugeMetricFamily(
            "livectl_broker_replica_partitions",
            "partitions whose replica set names the broker (a drain ends with 0 here and on "
            "livectl_broker_leader_partitions)",
            labels=["broker"],
        )
        for b in sorted(set(brokers) | set(s.draining_brokers) | set(c.replicas_by_broker)):
            draining.add_metric([str(b)], 1 if b in s.draining_brokers else 0)
            replicas.add_metric([str(b)], c.replicas_by_broker.get(b, 0))
        yield draining
        yield replicas
        yield GaugeMetricFamily(
            "livectl_preferred_leader_moves_left",
            "preferred-leader moves the leader-balance passes still want (brokers above the imbalance threshold, "
            "an elect-leaders --all queued)",
            s.leader_moves_left,
        )
        yield GaugeMetricFamily(
            "livectl_preferred_leader_moves_per_interval_max",
            "leader.imbalance.max.leaders.per.interval: the most leaders one pass moves (2147483647: no bound)",
            s.leader_moves_bound,
        )
        yield GaugeMetricFamily(
            "livectl_preferred_leader_moves_last_pass",
            "preferred-leader moves the last leader-balance pass made",
            s.leader_moves_last_pass,
        )


def registry_for(observatory: Observatory) -> Any:
    """A registry of its own (not the process-wide default, so that two controllers in one process —
    tests, a standby beside an active one — each serve their own figures)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ControllerCollector(observatory))
    return registry

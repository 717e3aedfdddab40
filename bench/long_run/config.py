"""The long run's settings (:class:`Config`), the short form (by hand) and its slack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streaming.settings import Settings

KINDS = ("create", "alter_config", "add_partitions", "reassign", "delete")
FAULTS = ("broker", "takeover")
#: the created topics kept at most: with one creation and one deletion in every five commands the count stays
#: near its start, and the fallbacks (nothing to act on: create) cannot grow it past this
MAX_POOL = 12
CREATED_PARTITIONS = 3
CREATED_RF = 2


@dataclass(frozen=True)
class Config:
    minutes: float = 60.0
    partitions: int = 100_000
    brokers: int = 5
    replication_factor: int = 3
    per_topic: int = 100
    window_seconds: float = 300.0
    warmup_windows: int = 1
    sample_seconds: float = 10.0
    command_interval: float = 3.0
    fault_interval: float = 150.0
    first_fault: float = 0.0  # seconds into the run; 0: half a fault interval
    broker_down_seconds: float = 30.0
    session_timeout_ms: int = 18_000
    produce_rate: float = 0.0
    # at 100k partitions a simulated broker process holds ~60,000 replicas: ticking them every 50 ms, fetching
    # every 50 ms and writing a 13 MB status file every second (simbrokers' defaults) would take a core each
    broker_tick_ms: int = 1000
    broker_fetch_interval_ms: int = 5000
    broker_status_interval_ms: int = 10_000
    replica_lag_time_max_ms: int = 30_000
    #: simbrokers --proposals-per-record (0: one AlterPartition record per partition, the form before requests)
    broker_proposals_per_record: int = 1000
    #: settings for both controllers over the shipped ones and the harness's
    controller_settings: tuple[tuple[str, str], ...] = ()
    #: how long the end may take: the commands answered, the cluster in agreement
    settle_seconds: float = 600.0

    def broker_args(self) -> list[str]:
        return [
            "--produce-rate",
            str(self.produce_rate),
            "--tick-ms",
            str(self.broker_tick_ms),
            "--fetch-interval-ms",
            str(self.broker_fetch_interval_ms),
            "--status-interval-ms",
            str(self.broker_status_interval_ms),
            "--replica-lag-time-max-ms",
            str(self.replica_lag_time_max_ms),
            "--proposals-per-record",
            str(self.broker_proposals_per_record),
        ]

    def controller_extra(self) -> dict[str, Any]:
        """The shipped trigger interval and transaction size (the harness's are the crash matrix's), then ours."""
        shipped = Settings.load()
        return {
            "trigger_interval": shipped.trigger_interval,
            "zk_ops_per_transaction": shipped.zk_ops_per_transaction,
            **dict(self.controller_settings),
        }


#: the short form (tests/e2e/test_long_run.py, by hand): 2,000 partitions for 75 s, a command every 2 s (each kind
#: several times), a broker killed and back twice and one takeover, windows of 15 s, sessions of 6 s
SHORT = Config(
    minutes=1.25,
    partitions=2000,
    window_seconds=15.0,
    sample_seconds=2.5,
    command_interval=2.0,
    fault_interval=26.0,
    first_fault=5.0,
    broker_down_seconds=6.0,
    session_timeout_ms=6000,
    broker_tick_ms=50,
    broker_fetch_interval_ms=50,
    broker_status_interval_ms=1000,
    replica_lag_time_max_ms=10_000,
    settle_seconds=120.0,
)
#: how much the threads and open descriptors of a process role may be above the first window after the warm-up in
#: the last one, in the short form, as (share, plus). The Python processes hold theirs (15 / 25 for the driver's
#: Python, ~13 / ~27 a broker): a few more at most. The Spark driver JVM's thread pools were still growing
#: in its first minutes (218 -> 284 threads in 45 s, one JVM, measured), its ~400 descriptors were not: a
#: quarter more threads and a tenth more descriptors, each plus a few (a takeover also puts another JVM in the role)
SHORT_SLACK: dict[str, dict[str, tuple[float, int]]] = {
    "active_jvm": {"threads": (0.3, 16), "fds": (0.1, 32)},
    "active_python": {"threads": (0.0, 4), "fds": (0.0, 8)},
    "brokers": {"threads": (0.0, 8), "fds": (0.0, 16)},
}


def within_slack(role: str, metric: str, first: float, last: float) -> bool:
    """Whether ``last`` is no more than :data:`SHORT_SLACK` above ``first`` for ``role``'s ``metric``."""
    share, plus = SHORT_SLACK[role][metric]
    return last <= first * (1 + share) + plus

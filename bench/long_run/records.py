"""What the long run records: commands, samples, windows and the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.harness import procstat


@dataclass
class Command:
    request_id: str
    kind: str
    topic: str
    sent: float  # seconds into the run
    answered: float | None = None
    status: str | None = None


@dataclass
class Sample:
    t: float  # seconds into the run
    #: role -> usage: ``active_python``, ``active_jvm``, ``active_workers``, ``standby_python``, ``standby_jvm``,
    #: ``standby_workers``, ``brokers`` (all broker processes together)
    roles: dict[str, procstat.Usage]
    #: (kind, pid, role) -> usage of each process on its own, for the growth within each process's life
    processes: dict[tuple[str, int, str], procstat.Usage]
    #: pid -> (role, CPU seconds it has used so far): the roles above, ``zookeeper``, ``kafka`` and ``bench``
    cpu: dict[int, tuple[str, float]] = field(default_factory=dict)
    #: the machine's busy CPU seconds so far (every process, ours or not)
    machine_busy_s: float = 0.0


@dataclass
class Window:
    index: int
    start: float
    end: float
    commands: int = 0
    answered: int = 0
    p50_s: float | None = None
    p99_s: float | None = None
    max_s: float | None = None
    events: list[str] = field(default_factory=list)
    #: role -> {"rss_mib", "threads", "fds", "processes"}
    roles: dict[str, dict[str, float]] = field(default_factory=dict)
    #: role -> cores it kept busy on average over the window (CPU seconds / window seconds), with ``machine``
    #: (every process) and ``other`` (the machine's less every role's)
    cpu_cores: dict[str, float] = field(default_factory=dict)


@dataclass
class Report:
    config: dict[str, Any]
    started_at: str = ""
    setup_s: float = 0.0
    windows: list[Window] = field(default_factory=list)
    #: "role.metric" -> growth per hour over the windows after the warm-up
    growth_per_hour: dict[str, float | None] = field(default_factory=dict)
    #: kind -> pooled within-process memory growth (MiB per hour) and what it was fitted on
    memory_growth_within_process: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    commands: dict[str, int] = field(default_factory=dict)
    latency_s: dict[str, float | None] = field(default_factory=dict)
    controller_epochs: list[int] = field(default_factory=list)
    #: the broker-events topic read back at the end: records by event type, distinct AlterPartition proposals
    broker_events: dict[str, int] = field(default_factory=dict)
    settle_s: float = 0.0
    problems: list[str] = field(default_factory=list)

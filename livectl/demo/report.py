"""What ``livectl demo`` is told (:class:`DemoOptions`) and what it reports (:class:`DemoReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from livectl import scenario as sc

DEFAULT_RUN_DIR = Path("run") / "demo"
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


class DemoError(RuntimeError):
    """The demo could not set up or a step cannot go on; the message says what and where."""


class DemoInterruptedError(DemoError):
    """Ctrl-C / SIGTERM while a step was running."""


@dataclass(frozen=True)
class DemoOptions:
    """Everything ``livectl demo`` can be told. ``zookeeper``/``bootstrap`` given = use those services
    (not started or stopped here); ``namespace`` = ZooKeeper chroot ``/<namespace>`` and topic names
    ``<namespace>.admin`` etc., so that the demo can share services with other users (tests)."""

    brokers: int = 5
    run_dir: Path = DEFAULT_RUN_DIR
    keep_running: bool = False
    buckets: int = 4
    master: str = "local[2]"
    step_timeout_s: float = 90.0
    #: print the controller's decisions (ZooKeeper changes, requests, admin results), not only steps
    verbose: bool = True
    zookeeper: str | None = None
    bootstrap: str | None = None
    namespace: str | None = None
    #: the brokers' ZooKeeper session timeout: a SIGKILLed broker is noticed after about this long
    broker_session_timeout_ms: int = 6000
    #: three real Apache Kafka brokers (ZooKeeper mode, through ``livectl channel``) instead of simulated
    #: ones; ``brokers`` must then be 3 (``livectl demo --brokers kafka``)
    kafka: bool = False
    #: with ``kafka``: records per second the demo's producer writes (half to each topic)
    produce_rate: float = 20.0


@dataclass(frozen=True)
class StepResult:
    name: str
    ok: bool
    seconds: float
    detail: str


@dataclass
class DemoReport:
    steps: list[StepResult] = field(default_factory=list)
    #: ZooKeeper and the brokers' status documents as they were after the last step (before teardown)
    final_view: sc.ClusterView | None = None
    final_status: dict[int, dict[str, Any]] = field(default_factory=dict)
    spark_ui: str | None = None
    interrupted: bool = False
    error: str | None = None
    #: what teardown stopped ("broker 1 (pid 123)", …) and what was still running afterwards
    stopped: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    total_seconds: float = 0.0
    #: what the scenario chose at run time: ``killed`` and ``shut_down`` broker ids, ``payments_before`` and
    #: ``payments_targets`` (partition -> replicas) of the reassignment
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.interrupted and bool(self.steps) and all(s.ok for s in self.steps)

    @property
    def exit_code(self) -> int:
        if self.interrupted and not self.ok:
            return EXIT_INTERRUPTED
        return EXIT_OK if self.ok and not self.leftovers else EXIT_FAILED

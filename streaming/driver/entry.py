"""Entry points of the controller job: ``livectl run``, ``python -m streaming`` and ``spark-submit``.

All three build :class:`streaming.settings.Settings` once, from the shipped ``livectl-defaults.json``
(``conf/``), the user's ``--config`` file and the command line, and pass it down::

    livectl run --zookeeper 127.0.0.1:2181 --bootstrap-server 127.0.0.1:9092 [--set key=value ...]
    spark-submit --master local[2] streaming/main.py --zookeeper ... --bootstrap-server ...

Exit codes: 0 stopped on request (Ctrl-C / SIGTERM), 1 bad configuration or a failed query (after
``python_worker_start_retries`` runs again when Spark could not start a Python worker in time), 3 the
controller lost its lease or was fenced by a newer controller, 4 ZooKeeper or Kafka unreachable at start (one
line naming the address). A checkpoint URI livectl cannot open is bad configuration (1).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from streaming.driver.preflight import UnreachableError, check_kafka, check_zookeeper
from streaming.driver.stderr_gate import StderrGate
from streaming.errors import StreamingError
from streaming.settings import Settings, SettingsError


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--zookeeper", help="ZooKeeper connect string (setting zookeeper_connect)")
    p.add_argument("--bootstrap-server", help="Kafka bootstrap servers (setting bootstrap_servers)")
    p.add_argument("--controller-id", type=int, help="id written into /controller (setting controller_id)")
    p.add_argument("--buckets", type=int, help="number of state buckets (setting num_buckets)")
    p.add_argument("--checkpoint-dir", help="Spark checkpoint folder (setting checkpoint_dir)")
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="a JSON object of settings applied over the shipped defaults (then --set and the flags win)",
    )
    p.add_argument(
        "--conf",
        dest="spark_conf",
        action="append",
        default=[],
        metavar="PROP=VALUE",
        help="a Spark property, as spark-submit --conf (wins over the shipped spark-defaults.conf); repeatable",
    )
    p.add_argument("--master", default=None, help="Spark master when not under spark-submit (default local[*])")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any setting (the shipped livectl-defaults.json, then --config); repeatable",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the driver's Python logging level (default: %(default)s)",
    )


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides = list(args.overrides)
    for flag, key in (
        ("zookeeper", "zookeeper_connect"),
        ("bootstrap_server", "bootstrap_servers"),
        ("controller_id", "controller_id"),
        ("buckets", "num_buckets"),
        ("checkpoint_dir", "checkpoint_dir"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            overrides.append(f"{key}={value}")
    config = getattr(args, "config", None)
    return Settings.load(overrides=overrides, config_path=config)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    # kazoo reports every dropped connection and expired session at WARNING; the controller says what
    # they mean for it (retries, fencing) itself
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        settings = settings_from_args(args)
    except SettingsError as e:
        print(f"livectl run: {e}", file=sys.stderr)
        return 1
    try:
        spark_conf = parse_spark_conf(args.spark_conf)
    except SettingsError as e:
        print(f"livectl run: {e}", file=sys.stderr)
        return 1
    try:
        # before Spark's start-up (tens of seconds): a wrong address is one line, at once
        check_zookeeper(settings)
        check_kafka(settings)
    except UnreachableError as e:
        print(f"livectl run: {e}", file=sys.stderr, flush=True)
        return 4
    master = args.master or ("local[*]" if not _under_spark_submit() else None)
    workers = worker_python(os.environ, spark_conf)
    if workers is not None:
        os.environ["PYSPARK_PYTHON"] = workers
    # before Spark's JVM starts, which inherits it; under spark-submit the JVM is the parent and owns it
    gate = None if _under_spark_submit() else StderrGate.install()
    try:
        return _run_controller(settings, master, workers, spark_conf, gate)
    finally:
        if gate is not None and gate.is_open:
            gate.restore()


def _run_controller(
    settings: Settings, master: str | None, workers: str | None, spark_conf: dict[str, str], gate: StderrGate | None
) -> int:
    from streaming.driver.app import ControllerApp
    from streaming.driver.shutdown import ControllerStoppedError

    def say(line: str) -> None:
        if gate is not None:
            gate.say(line)
        else:
            print(line, file=sys.stderr, flush=True)

    stopping = threading.Event()
    current: list[ControllerApp] = []

    def on_fenced(app: ControllerApp) -> None:
        quiet_for_fenced_exit(app.spark)
        if gate is not None:
            gate.close()

    def make_app() -> ControllerApp:
        app = ControllerApp(settings, master=master, worker_python=workers, spark_conf=spark_conf)
        app.on_fenced = lambda _reason: on_fenced(app)
        current[:] = [app]
        if stopping.is_set():
            app.stop()
        return app

    def on_signal(signum: int, _frame: Any) -> None:
        logging.getLogger("livectl").info("signal %d: stopping", signum)
        stopping.set()
        for app in current:
            app.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        run_again_after_worker_start_failures(
            make_app,
            settings.python_worker_start_retries,
            stopping,
            lambda line: say(f"livectl run: {line}"),
        )
    except ControllerStoppedError as e:
        say(f"livectl run: {e}")
        return 3
    except StreamingError as e:
        say(f"livectl run: {e}")
        return 1
    return 0


class RunnableApp(Protocol):
    def run(self, ready: threading.Event | None = None) -> None: ...


def run_again_after_worker_start_failures(
    make_app: Callable[[], RunnableApp],
    retries: int,
    stopping: threading.Event,
    say: Callable[[str], None],
    *,
    pause_s: float = 5.0,
    ready: threading.Event | None = None,
) -> None:
    """Run the controller (``make_app().run``) until it stops. When its query failed because Spark could
    not start a Python worker in time (:class:`~streaming.driver.shutdown.WorkerStartError`), the run has
    resigned (its lease released, its sinks closed): say so and run a new one after ``pause_s`` times the
    failures so far, at most ``retries`` times in a row — a run that became the active controller resets
    the count. The last failure, or any other, is raised; a stop asked during the pause ends it quietly.
    ``ready``, when given, is set as soon as a run becomes the active controller."""
    from streaming.driver.shutdown import WorkerStartError

    failures = 0
    while True:
        became_active = _Relay(ready)
        try:
            make_app().run(became_active)
            return
        except WorkerStartError as e:
            if became_active.is_set():
                failures = 0
            if stopping.is_set() or failures >= retries:
                raise
            failures += 1
            pause = pause_s * failures
            say(
                f"{e}: Spark could not start a Python worker in time; this controller resigned and stands for "
                f"election again in {pause:g} s (restart {failures} of {retries} in a row: python_worker_start_retries)"
            )
            if stopping.wait(pause):
                return


class _Relay(threading.Event):
    """One run's ready event, which also sets ``also`` (the caller's, across runs)."""

    def __init__(self, also: threading.Event | None) -> None:
        super().__init__()
        self.also = also

    def set(self) -> None:
        super().set()
        if self.also is not None:
            self.also.set()


def parse_spark_conf(items: Sequence[str]) -> dict[str, str]:
    """``--conf PROP=VALUE`` texts as a dict (the last one of a key wins); a text without ``=`` or a key
    that is not a Spark property (``spark.…``) is refused, naming it."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SettingsError("--conf", f"{item!r} must look like spark.property=value")
        if not key.startswith("spark."):
            raise SettingsError("--conf", f"{key!r} is not a Spark property (they start with 'spark.')")
        out[key] = value
    return out


def worker_python(environ: Mapping[str, str], spark_conf: Mapping[str, str]) -> str | None:
    """The interpreter Spark's Python processes run: ``None`` (the user's choice stands) when ``PYSPARK_PYTHON``
    or ``spark.pyspark.python`` is set, else this driver's own — it has livectl and its dependencies,
    which a ``python3`` found on the PATH may not (a venv that is not activated).

    Spark's Python side takes the workers' interpreter from ``PYSPARK_PYTHON`` (``spark-submit`` sets it
    from ``spark.pyspark.python``), so :func:`run` puts the default into its environment too, before the
    SparkContext exists."""
    if environ.get("PYSPARK_PYTHON") or spark_conf.get("spark.pyspark.python"):
        return None
    return sys.executable


def quiet_for_fenced_exit(spark: Any) -> None:
    """A fenced controller stops its query wherever it is (often inside a micro-batch, whose job Spark
    then reports as failed, and whose offset log the new controller may already have written): all of
    that is expected, and the process says so in one line. Silence Python's logging (py4j and pyspark
    included), uncaught exceptions in other threads, and Spark's log4j for the rest of the process."""
    import threading

    logging.disable(logging.CRITICAL)
    threading.excepthook = lambda _args: None
    if spark is not None:
        # the JVM may be stopping already: nothing to silence then
        # setLogLevel sets the root logger; the shipped log4j2.properties gives Spark's streaming loggers no
        # level of their own, so they follow it (a logger with its own level would still speak)
        with contextlib.suppress(Exception):
            spark.sparkContext.setLogLevel("OFF")


def _under_spark_submit() -> bool:
    # spark-submit starts Python with the gateway already set up
    return "PYSPARK_GATEWAY_PORT" in os.environ


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run the controller job (Spark Structured Streaming)")
    add_run_arguments(p)
    p.set_defaults(func=run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="livectl-controller", description="the livectl controller job")
    add_run_arguments(parser)
    return run(parser.parse_args(argv))

"""The controller query: Kafka topics in, ``applyInPandasWithState`` per bucket, ``foreachBatch`` out.

::

    Kafka source (livectl.admin + livectl.broker-events, Kafka offsets as source offsets): Spark's
    format("kafka") or livectl's Python livectl-kafka (:mod:`streaming.source.query_source`), the same rows
      → mapInPandas(prepare): great-expectations suite, decode, route to buckets (+ one tick per bucket)
      → groupBy(bucket).applyInPandasWithState(make_step(checkpoint)) — core.controller.step per bucket
      → observe("livectl", Kafka's controller metrics)
      → foreachBatch(Dispatcher): ZooKeeper sink, then request sink, then admin results / rejected

``spark.sql.shuffle.partitions`` must equal the bucket count (docs/design/decisions.md, decision 1): every shuffle
partition is a state store written on every micro-batch.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.errors import first_line
from streaming.query.bucket_keys import BucketKeys, checkpoint_scheme, group_keys
from streaming.query.dispatch import Dispatcher
from streaming.query.routing import ROUTED_SCHEMA, make_prepare
from streaming.query.stateful import METRIC_COLUMNS, OUTPUT_SCHEMA, STATE_SCHEMA, make_step
from streaming.runtime.plan_text import explain_text
from streaming.settings import Settings

OBSERVATION_NAME = "livectl"

log = logging.getLogger("livectl.query")


#: the sessions :func:`register_source` registered the source in (a registration is per session)
_REGISTERED: weakref.WeakSet[Any] = weakref.WeakSet()


def register_source(spark: Any) -> None:
    """Register the ``livectl-kafka`` source in ``spark``'s session, unless this process did already (a
    second registration only makes Spark warn that it replaced the first). The session's first data-source
    call makes Spark look for ``pyspark_*`` data-source packages in a Python planner process, once per JVM."""
    from streaming.source.kafka_source import KafkaDataSource

    if spark not in _REGISTERED:
        spark.dataSource.register(KafkaDataSource)
        _REGISTERED.add(spark)


@dataclass(frozen=True)
class SourceStart:
    """How this run of the query starts reading (:mod:`streaming.source.kafka_source`): ``starting_offsets``
    for a new checkpoint (``earliest``, ``latest`` or a JSON object of offsets; ``None``: the setting),
    and the failover barrier — no record past the checkpoint until the reference of controller epoch
    ``barrier_epoch`` (or newer) whose snapshot is under ``barrier_path`` is on the broker-events topic."""

    starting_offsets: str | None = None
    barrier_epoch: int | None = None
    barrier_path: str | None = None


@dataclass
class StartTimes:
    """Where the query's start went, in seconds, phase by phase (for the controller's log line)."""

    phases: list[tuple[str, float]] = field(default_factory=list)
    _mark: float = field(default_factory=time.monotonic)

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.phases.append((phase, now - self._mark))
        self._mark = now

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.phases)


def source_options(settings: Settings, start: SourceStart | None = None) -> dict[str, str]:
    """The options the controller's ``livectl-kafka`` source (:mod:`streaming.source.kafka_source`) is loaded with
    for ``start``."""
    start = start or SourceStart()
    options = {
        "bootstrap_servers": settings.bootstrap_servers,
        "topics": f"{settings.admin_topic},{settings.broker_events_topic}",
        "starting_offsets": start.starting_offsets or settings.starting_offsets,
        "max_records_per_batch": str(settings.max_records_per_batch),
        "fail_on_data_loss": str(settings.fail_on_data_loss).lower(),
        # a broker restarting is waited out as long as the sinks wait for it
        "unreachable_timeout_ms": str(settings.sink_retry_timeout_ms),
    }
    # Kafka's security properties reach the source's consumer as ``kafka.<name>``, as with Spark's own
    # Kafka source (Spark redacts options named like passwords in its plans and UI)
    for name, value in settings.kafka_security().properties().items():
        options[f"kafka.{name}"] = value
    if start.barrier_epoch is not None:
        options["barrier_topic"] = settings.broker_events_topic
        options["barrier_epoch"] = str(start.barrier_epoch)
        if start.barrier_path is not None:
            options["barrier_path"] = start.barrier_path
    return options


def kafka_options(settings: Settings, start: SourceStart | None = None) -> dict[str, str]:
    """The options of Spark's Kafka source (``format("kafka")``) for ``start``: both topics subscribed, the
    starting offsets (without the Python source's marks), ``failOnDataLoss`` from ``fail_on_data_loss``,
    ``maxOffsetsPerTrigger`` from ``max_records_per_batch``, and livectl's Kafka client security as
    ``kafka.<name>`` (the Java client's names: :func:`streaming.source.query_source.java_security`).

    Spark's source has no failover barrier: behind one, the controller publishes its reference before the
    query starts (:class:`streaming.driver.app.ControllerApp`), and the run is not capped, so that its first
    micro-batch reaches the reference, whatever the backlog before it (the Python source's barrier batch
    is not capped either)."""
    from streaming.source.query_source import java_security, without_marks

    start = start or SourceStart()
    options = {
        "kafka.bootstrap.servers": settings.bootstrap_servers,
        "subscribe": f"{settings.admin_topic},{settings.broker_events_topic}",
        "startingOffsets": without_marks(start.starting_offsets or settings.starting_offsets),
        "failOnDataLoss": str(settings.fail_on_data_loss).lower(),
    }
    if start.barrier_epoch is None:
        options["maxOffsetsPerTrigger"] = str(settings.max_records_per_batch)
    for name, value in java_security(settings.kafka_security().properties()).items():
        options[f"kafka.{name}"] = value
    return options


def load_kafka(spark: Any, options: Mapping[str, str]) -> Any:
    """Spark's Kafka source with ``options`` (:func:`kafka_options`), as the rows the Python source gives
    (:data:`streaming.source.kafka_source.SCHEMA`): key and value as UTF-8 text, then topic, partition, offset and
    timestamp; Spark's ``timestampType`` (and headers) are left out."""
    reader = spark.readStream.format("kafka")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().selectExpr(
        "CAST(key AS STRING) AS key",
        "CAST(value AS STRING) AS value",
        "topic",
        "CAST(partition AS INT) AS partition",
        "CAST(offset AS BIGINT) AS offset",
        "timestamp",
    )


def run_source(settings: Settings) -> str:
    """The source a frame is built on: ``kafka`` or ``python``. The controller resolves ``auto`` once per run
    (:func:`streaming.source.query_source.choose`); a caller that did not (a test, a bench script) gets the Python
    source, as before Spark's connector was an option."""
    return "kafka" if settings.query_source == "kafka" else "python"


def query_options(settings: Settings, start: SourceStart | None = None) -> dict[str, str]:
    """The options of the run's source (:func:`run_source`) for ``start``."""
    return kafka_options(settings, start) if run_source(settings) == "kafka" else source_options(settings, start)


def load_query_source(
    spark: Any, settings: Settings, options: Mapping[str, str], times: StartTimes | None = None
) -> Any:
    """The run's source (:func:`run_source`) loaded with ``options``; the Python source registered first
    (``times`` gets that phase)."""
    if run_source(settings) == "kafka":
        return load_kafka(spark, options)
    register_source(spark)
    if times is not None:
        times.lap("source registered")
    return load_source(spark, options)


def load_source(spark: Any, options: Mapping[str, str]) -> Any:
    """The ``livectl-kafka`` streaming DataFrame with ``options``; the source must be registered
    (:func:`register_source`, which its callers time apart). Spark creates the source in a Python planner
    process here (its schema); the query's stream reuses it."""
    from streaming.source.options import SOURCE_NAME

    reader = spark.readStream.format(SOURCE_NAME)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


@dataclass(frozen=True)
class PreparedSource:
    """The source loaded ahead of the query's start (:class:`SourceAhead`) with ``options``: the query uses
    ``frame`` when it would load the source with exactly these options, and loads its own otherwise."""

    options: Mapping[str, str]
    frame: Any
    seconds: float
    #: where ``seconds`` went (:class:`StartTimes`)
    phases: str = ""


def prepare_source(spark: Any, settings: Settings) -> PreparedSource:
    """Load the source as a query started on a new checkpoint would (no failover barrier, the
    ``starting_offsets`` setting): the session's data-source lookup and the source's creation done."""
    started = time.monotonic()
    times = StartTimes()
    options = query_options(settings)
    frame = load_query_source(spark, settings, options, times)
    times.lap("source loaded")
    return PreparedSource(options, frame, time.monotonic() - started, str(times))


class SourceAhead:
    """:func:`prepare_source` in a background thread as soon as the SparkSession is up, then ``then`` (the
    Python workers' warm-up, :meth:`streaming.warm.warmup.Warmup.start`), in that order;
    ``beside`` (what the warm-up does without Python, :meth:`streaming.warm.warmup.Warmup.prime`) runs in a
    thread of its own meanwhile.

    Why the order: Spark starts a Python worker daemon inside a JVM-wide lock (``SparkEnv.createPythonWorker``
    is synchronized and waits for the daemon to report its port), and livectl's daemon imports the workers'
    modules before it reports (:mod:`streaming.warm.worker_daemon`, seconds). Every Python planner process the
    query's start needs — the data-source lookup, the source's creation — goes through the same lock, so
    started after the warm-up they wait for its imports (``docs/decisions/2026-11-24-python-warmup-job.md``).
    A failure is logged, never raised: the query then loads its own source, as without this."""

    def __init__(
        self,
        spark: Any,
        settings: Settings,
        then: Callable[[], object] | None = None,
        beside: Callable[[], object] | None = None,
    ) -> None:
        self._spark = spark
        self._settings = settings
        self._then = then
        self._beside = beside
        self._done = threading.Event()
        self._prepared: PreparedSource | None = None
        self.thread = threading.Thread(target=self._run, name="livectl-source-ahead", daemon=True)

    def start(self) -> SourceAhead:
        if self._beside is not None:
            threading.Thread(target=self._run_beside, name="livectl-source-ahead-beside", daemon=True).start()
        self.thread.start()
        return self

    def _run_beside(self) -> None:
        assert self._beside is not None
        try:
            self._beside()
        except Exception as e:  # an optimisation only: nothing waits for it
            log.info("job beside the source's preparation did not complete: %s", first_line(e))

    def _run(self) -> None:
        try:
            self._prepared = prepare_source(self._spark, self._settings)
            log.info("query source prepared ahead in %.1f s (%s)", self._prepared.seconds, self._prepared.phases)
        except Exception as e:  # the query's start loads its own source, and reports what fails there
            log.info("query source not prepared ahead: %s", first_line(e))
        finally:
            self._done.set()
            if self._then is not None:
                self._then()

    def result(self, timeout: float = 120.0) -> PreparedSource | None:
        """The prepared source once ready (waits up to ``timeout``), or ``None`` when it failed or is late."""
        self._done.wait(timeout)
        return self._prepared


def controller_frame(
    spark: Any,
    settings: Settings,
    start: SourceStart | None = None,
    *,
    times: StartTimes | None = None,
    prepared: PreparedSource | None = None,
    scheme: BucketKeys | None = None,
) -> Any:
    """The streaming DataFrame of decision rows (before ``foreachBatch``), with observed metrics;
    ``times`` gets the phases of its construction. The source is ``prepared``'s frame when that was
    loaded with the same options, else loaded here. ``scheme``: the buckets' key scheme, else the
    checkpoint's (:func:`streaming.query.bucket_keys.checkpoint_scheme`, which records it in a new checkpoint)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    times = times if times is not None else StartTimes()
    options = query_options(settings, start)
    if prepared is not None and dict(prepared.options) == options:
        records = prepared.frame
        times.lap("source prepared ahead")
    else:
        records = load_query_source(spark, settings, options, times)
        times.lap("source loaded")
    routed = records.mapInPandas(make_prepare(settings.num_buckets, settings.admin_topic), ROUTED_SCHEMA)
    routed = keyed_by_bucket(spark, routed, settings, scheme)
    step = make_step(
        settings.checkpoint_dir,
        settings.controller_config(),
        summaries=settings.metrics_port > 0,
        num_buckets=settings.num_buckets,
    )
    decisions = routed.groupBy("bucket").applyInPandasWithState(
        step, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
    metrics = [F.coalesce(F.sum(F.col(m)), F.lit(0)).alias(m) for m in METRIC_COLUMNS]
    frame = decisions.observe(
        OBSERVATION_NAME,
        # the query runs only while this driver holds the controller lease
        F.max(F.lit(1)).alias("ActiveControllerCount"),
        *metrics,
        F.count(F.lit(1)).alias("DecisionRows"),
    )
    times.lap("plan built")
    return frame


def rehearse_frame(spark: Any, settings: Settings, prepared: PreparedSource) -> tuple[float, float, int]:
    """Build the query's DataFrame on ``prepared``'s source, plan it, and drop it, never started; returns the
    seconds the build and the planning took, and how many whole-stage-codegen subtrees the plan has (each
    one's code generated and compiled, or found compiled). A standby does it while it waits for the lease:
    the build after winning then finds pyspark's and the JVM's code paths warm (a driver's first build took
    1.1 s here, the next ones 0.3 s; ``docs/decisions/2026-11-29-query-plan-rehearsed.md``), and so does the
    first micro-batch, which plans the same operators and generates the same code for them: the planning is
    Spark's ``explain("codegen")``, which runs the optimizer and the physical planner and generates and
    compiles the Java of each whole-stage-codegen subtree (to report its size), so the compiled classes are in
    the JVM's cache of generated code when the batch asks for them. It reads and writes nothing: the key
    scheme is given, not the checkpoint's (whose first read records it, a write only the lease holder may
    make), and planning a streaming frame that is not started reads no offsets."""
    started = time.monotonic()
    frame = controller_frame(spark, settings, prepared=prepared, scheme=BucketKeys.SPREAD)
    built = time.monotonic()
    text = explain_text(frame, "codegen")
    found = re.search(r"Found (\d+) WholeStageCodegen subtrees", text)
    return built - started, time.monotonic() - built, int(found.group(1)) if found else 0


def rehearse_in_background(spark: Any, settings: Settings, source: SourceAhead) -> threading.Thread:
    """:func:`rehearse_frame` on a thread of its own once ``source`` has its source prepared (nothing when it
    has none: loading one would start Spark's planner processes). Nobody waits for it: a standby that wins
    the lease meanwhile builds its own frame beside it. A failure is logged, never raised."""

    def run() -> None:
        prepared = source.result()
        if prepared is None:
            return
        try:
            built_s, planned_s, subtrees = rehearse_frame(spark, settings, prepared)
            log.info(
                "query plan rehearsed in %.1f s (built %.1f s, planned and the generated code of its %d "
                "whole-stage subtrees compiled %.1f s)",
                built_s + planned_s,
                built_s,
                subtrees,
                planned_s,
            )
        except Exception as e:  # an optimisation only
            log.info("query plan not rehearsed: %s", first_line(e))

    thread = threading.Thread(target=run, name="livectl-plan-rehearsal", daemon=True)
    thread.start()
    return thread


def keyed_by_bucket(spark: Any, routed: Any, settings: Settings, scheme: BucketKeys | None = None) -> Any:
    """``routed`` with each bucket index replaced by its grouping key under ``scheme``, else the checkpoint's
    (:mod:`streaming.query.bucket_keys`: one shuffle partition, so one task, per bucket)."""
    from pyspark.sql import functions as F

    from streaming.runtime.checkpoint_fs import FileSystemCheckpointStore

    if scheme is None:
        store = FileSystemCheckpointStore.for_spark(spark, settings.checkpoint_dir)
        scheme = checkpoint_scheme(store, settings.num_buckets)
    if scheme is BucketKeys.IDENTITY:
        return routed
    keys = F.array(*[F.lit(k) for k in group_keys(settings.num_buckets, scheme)])
    bucket = F.col("bucket")
    return routed.withColumn("bucket", F.when(bucket >= 0, F.element_at(keys, bucket + 1)).otherwise(bucket))


def start_query(
    spark: Any,
    settings: Settings,
    dispatcher: Dispatcher,
    start: SourceStart | None = None,
    *,
    times: StartTimes | None = None,
    prepared: PreparedSource | None = None,
) -> Any:
    """Start the named query with its checkpoint; returns the ``StreamingQuery``. ``times`` gets the
    phases of the start; ``prepared``: see :func:`controller_frame`."""
    times = times if times is not None else StartTimes()
    frame = controller_frame(spark, settings, start, times=times, prepared=prepared)
    query = (
        frame.writeStream.queryName(settings.query_name)
        .outputMode("append")
        .option("checkpointLocation", settings.checkpoint_dir)
        .trigger(processingTime=settings.trigger_interval)
        .foreachBatch(dispatcher)
        .start()
    )
    times.lap("stream started")
    return query

"""What the Spark UI says about the controller: application name, job descriptions, role changes.

What Spark allows (4.3): the application name (``spark.app.name``) is read once, when the SparkContext
starts, and the UI and the history server show that name for the life of the application; a job's
description (``SparkContext.setJobDescription``) is read when the job starts and never changes after.
So:

* **the application name** says the controller id and the role the process had when Spark started
  (:func:`app_name`: ``livectl c1000 active`` or ``livectl c1001 standby``). A standby starts Spark
  before it waits for the lease, so a standby that later takes over keeps its ``standby`` name; the Jobs
  tab says the change (next point) and the name says so in words: ``standby at start``;
* **role changes** are zero-task jobs whose descriptions say them (:func:`announce`): ``livectl c1001
  standby: waiting for the controller lease (held by c1000)``, then ``livectl c1001 e6 active: elected``.
  A job over no partitions runs no task and no stage, yet Spark lists it in the Jobs tab (and its status
  store and REST API) with its description: the cheapest way to put a line in the UI;
* **each micro-batch** gets two descriptions. The batch's own job (the one that runs the buckets' step)
  says ``livectl c1000 e5 batch 68: deciding``; once the batch's decisions are carried out, a job of one
  task says the controller's figures *after* the batch, short and most important first
  (:func:`batch_summary`: ``livectl c1000 e5 batch 68: offline 0, URP 3, reassigning 2`` then the rest).
  Jobs are listed newest first, so the top line of the Jobs tab is the controller's current state;
* **the figures as named accumulators** (:func:`publish_figures`): that job's one task adds each figure
  after the batch to a named JVM ``LongAccumulator`` (``livectl.OfflinePartitionsCount``, …), so its stage
  (named ``livectl figures after batch 68``) lists them in the Stages tab and in Spark's REST API
  (``/api/v1/applications/<id>/stages`` → ``accumulatorUpdates``), each stage its own batch's values.

Why a jar: PySpark's accumulators are unnamed in the UI, a named JVM accumulator shows in a stage only
when JVM code in that stage's tasks adds to it, and the accumulator behind ``observe("livectl", …)`` is
not listed (checked with Spark's status store, 4.3.0). So the task runs a small Java UDF,
``livectl.spark.BatchFigures`` (source ``streaming/jvm/src``, shipped built as ``conf/jars/livectl-spark.jar``
by ``scripts/build-jar``), registered through PySpark's public ``spark.udf.registerJavaFunction``: the one
instance Spark makes on the driver reads the batch's figures from a local property of the registering
thread and registers fresh accumulators, and a one-row query of one task calls it. It must be on the
driver's class path and reach the executors: ``livectl run`` adds it to ``spark.jars``
(:func:`streaming.driver.session.spark_session`); under ``spark-submit`` it is
``--jars "$(livectl conf path jars/livectl-spark.jar)"``. Without it the figures job is the job of no
task of before (:func:`announce`: the Jobs tab line only) and the driver logs once how to add the jar.

The figures job runs in a thread of its own: the micro-batch waits only for the registration and the
query's planning, not for the job. The job is submitted after the batch's own work, so it is listed above
the batch. Being a query, it is listed in the SQL tab too, beside the ``DROP TEMPORARY FUNCTION`` that frees
the function's name for the next batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

log = logging.getLogger("livectl.spark_ui")

#: the Java UDF whose call, in a one-task job, adds the figures to named accumulators (``streaming/jvm/src``)
FIGURES_CLASS = "livectl.spark.BatchFigures"
#: the name it is registered under in the session (``spark.udf.registerJavaFunction``)
FIGURES_FUNCTION = "livectl_batch_figures"
#: the local property its constructor reads the figures from (``BatchFigures.FIGURES_PROPERTY``)
FIGURES_PROPERTY = "livectl.figures"
#: what the accumulators' names start with (``livectl.OfflinePartitionsCount``)
ACCUMULATOR_PREFIX = "livectl."

#: the short head of a batch summary: (label, metric), most important first
HEAD = (
    ("offline", "OfflinePartitionsCount"),
    ("URP", "UnderReplicatedPartitions"),
    ("under min ISR", "UnderMinIsrPartitionCount"),
    ("reassigning", "ReassigningPartitions"),
)
#: the tail: (label, metric)
TAIL = (
    ("imbalanced", "PreferredReplicaImbalanceCount"),
    ("topics", "GlobalTopicCount"),
    ("partitions", "GlobalPartitionCount"),
    ("topics to delete", "TopicsToDeleteCount"),
    ("replicas to delete", "ReplicasToDeleteCount"),
)


def app_name(query_name: str, controller_id: int, standby: bool) -> str:
    """The application name: controller id and the role at Spark's start (see the module docstring)."""
    role = "standby at start" if standby else "active"
    prefix = "livectl" if query_name == "livectl" else f"livectl {query_name}"
    return f"{prefix} c{controller_id} {role}"


def batch_head(controller_id: int, epoch: int, batch_id: int) -> str:
    return f"livectl c{controller_id} e{epoch} batch {batch_id}"


def batch_summary(controller_id: int, epoch: int, batch_id: int, metrics: Mapping[str, int]) -> str:
    """``livectl c1000 e5 batch 68: offline 0, URP 3, reassigning 2; imbalanced 0, topics 4, …`` — the
    figures after the batch; a figure the metrics lack is left out."""
    head = ", ".join(f"{label} {metrics[k]}" for label, k in HEAD if k in metrics)
    tail = ", ".join(f"{label} {metrics[k]}" for label, k in TAIL if k in metrics)
    text = f"{batch_head(controller_id, epoch, batch_id)}: {head}"
    return f"{text}; {tail}" if tail else text


def announce(spark_context: Any, description: str) -> None:
    """Put ``description`` in the Jobs tab as a job of no task (see the module docstring), then restore the
    thread's description."""
    previous = spark_context.getLocalProperty("spark.job.description")
    spark_context.setJobDescription(description)
    try:
        # no partition, so no task (and no Python worker): Spark still lists the job with its description
        spark_context.emptyRDD().count()
    finally:
        spark_context.setLocalProperty("spark.job.description", previous)


def figures_lines(metrics: Mapping[str, int]) -> str:
    """``Name<TAB>value`` per figure, the batch summary's order first, then the rest by name: what
    ``BatchFigures`` reads from :data:`FIGURES_PROPERTY` (one property, whatever the number of figures)."""
    first = [k for _label, k in (*HEAD, *TAIL) if k in metrics]
    rest = sorted(k for k in metrics if k not in first)
    for k in (*first, *rest):
        if not k or not all(c.isalnum() or c in "_." for c in k):
            raise ValueError(f"figure name {k!r}: must be letters, digits, '_' or '.'")
    return "".join(f"{k}\t{int(metrics[k])}\n" for k in (*first, *rest))


_warned_no_jar: set[str] = set()


def publish_figures(spark: Any, description: str, metrics: Mapping[str, int], batch_id: int) -> Future[None] | None:
    """Say ``description`` in the Jobs tab and ``metrics`` as named accumulators in the Stages tab: a job
    of one task, run in a thread of its own (see the module docstring). Returns the job's future (``result()``
    waits for it), or ``None`` when the jar is missing and the description went out as a job of no task
    (:func:`announce`). The calling thread's local properties are left as they were."""
    from pyspark.errors import AnalysisException
    from pyspark.sql.types import LongType

    sc = spark.sparkContext
    previous = sc.getLocalProperty(FIGURES_PROPERTY)
    # the UDF's constructor, on the driver in this thread, reads the figures from this property
    sc.setLocalProperty(FIGURES_PROPERTY, figures_lines(metrics))
    try:
        spark.udf.registerJavaFunction(FIGURES_FUNCTION, FIGURES_CLASS, LongType())
    except AnalysisException as e:
        if e.getCondition() != "CANNOT_LOAD_FUNCTION_CLASS":
            raise
        app = str(sc.applicationId)
        if app not in _warned_no_jar:
            _warned_no_jar.add(app)
            log.warning(
                "the Spark UI's Stages tab will not show the controller's figures: %s is not on the driver's "
                'class path (spark-submit --jars "$(livectl conf path jars/livectl-spark.jar)"; livectl run '
                "adds it itself)",
                FIGURES_CLASS,
            )
        announce(sc, description)
        return None
    finally:
        sc.setLocalProperty(FIGURES_PROPERTY, previous)
    try:
        # planned here, with this batch's UDF instance (a filter: Spark prunes no filter, so the task calls it)
        frame = spark.range(0, 1, numPartitions=1).where(f"{FIGURES_FUNCTION}(id) = id")
    finally:
        # the plan keeps the instance; dropped, the name is free for the next batch without Spark's warning
        # that a function was replaced
        spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {FIGURES_FUNCTION}")
    site = f"livectl figures after batch {batch_id}"
    done: Future[None] = Future()

    def run() -> None:
        # local properties are per thread: this one's job carries the description and the stage's name
        sc.setJobDescription(description)
        sc.setLocalProperty("callSite.short", site)
        sc.setLocalProperty("callSite.long", site)
        try:
            # isEmpty: one task (a limit of one row over one partition); unlike collect, PySpark does not
            # replace the call site with its own, so the stage keeps the name set above
            frame.isEmpty()
        except BaseException as e:  # handed to whoever waits on the future
            done.set_exception(e)
        else:
            done.set_result(None)

    threading.Thread(target=run, name=f"livectl-figures-{batch_id}", daemon=True).start()
    return done

"""What Spark's status store says about the session's jobs and stages: the Jobs and Stages tabs' source.

The shared test session runs with the UI disabled, so the REST API (``/api/v1/applications/<id>/jobs``,
``…/stages``) that a user reads is not served; its status store is kept regardless, and PySpark has no
public call that reads a job's description or a stage's accumulators (``SparkContext.statusTracker()``
gives neither). So the tests read the store through the JVM; livectl itself never does.
"""

from __future__ import annotations

from typing import Any

ACCUMULATOR_PREFIX = "livectl."


def stage_figures(spark_context: Any, limit: int = 20) -> list[tuple[str, dict[str, int]]]:
    """The newest ``limit`` stages that carry ``livectl.`` accumulators, newest first: (stage name, figures
    without the prefix), from Spark's status store (what the Stages tab and
    ``/api/v1/applications/<id>/stages`` → ``accumulatorUpdates`` show; kept when the UI is disabled)."""
    store = spark_context._jsc.sc().statusStore()
    jobs = store.jobsList(None)  # newest first
    out: list[tuple[str, dict[str, int]]] = []
    for i in range(int(jobs.size())):
        ids = jobs.apply(i).stageIds()
        for stage_id in sorted((int(ids.apply(k)) for k in range(int(ids.size()))), reverse=True):
            stage = store.lastStageAttempt(stage_id)
            updates = stage.accumulatorUpdates()
            figures: dict[str, int] = {}
            for k in range(int(updates.size())):
                acc = updates.apply(k)
                name = str(acc.name())
                if name.startswith(ACCUMULATOR_PREFIX):
                    figures[name[len(ACCUMULATOR_PREFIX) :]] = int(str(acc.value()))
            if figures:
                out.append((str(stage.name()), figures))
                if len(out) == limit:
                    return out
    return out


def job_descriptions(spark_context: Any, limit: int = 50) -> list[str]:
    """The descriptions of the newest ``limit`` jobs, newest first, from Spark's status store (what the
    Jobs tab and ``/api/v1/applications/<id>/jobs`` show; kept even when the UI is disabled)."""
    jobs = spark_context._jsc.sc().statusStore().jobsList(None)
    out: list[tuple[int, str]] = []
    for i in range(int(jobs.size())):
        job = jobs.apply(i)
        desc = job.description()
        out.append((int(job.jobId()), str(desc.get()) if desc.isDefined() else ""))
    out.sort(reverse=True)
    return [d for _id, d in out[:limit]]

"""A bucket's large payloads cross Spark packed (:func:`streaming.query.stateful.output_frame`): the binary column of
``OUTPUT_SCHEMA`` through Spark's Arrow conversions both ways — pandas to the JVM in the Python worker, the JVM
to pandas in the driver's ``toPandas`` — gives the driver the very texts the bucket made."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from streaming.query import stateful

pytestmark = pytest.mark.spark


def test_packed_payloads_cross_spark_and_come_back_whole(spark: Any) -> None:
    large = '{"api":"LeaderAndIsr"}\n' + '{"partitionStates":[{"partitionIndex":0,"topic":"é"}]}' * 5000
    small = '{"api":"UpdateMetadata"}'
    zeros = (0,) * len(stateful.METRIC_COLUMNS)

    def bucket(_: pd.DataFrame) -> pd.DataFrame:
        return stateful.output_frame([[0, 0, stateful.KIND_REQUEST, large, *zeros], [0, 1, "metrics", small, *zeros]])

    frame = spark.range(1).groupBy("id").applyInPandas(bucket, stateful.OUTPUT_SCHEMA).toPandas()
    assert len(large) >= stateful.PACK_MIN_CHARS
    assert frame["payload"].tolist() == ["", small]  # the large one crossed packed
    assert stateful.payloads(frame.sort_values("seq")) == [large, small]

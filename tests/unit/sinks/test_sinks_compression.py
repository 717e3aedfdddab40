"""The request sink's compression: the codec names, the setting that chooses one, and its path to the sink."""

from __future__ import annotations

from pathlib import Path

import pytest
from shell_pipeline import store_at

from sinks.compression import COMPRESSIONS, CompressionError, compression_type
from sinks.ports import Fence
from sinks.requests import RequestSink
from streaming.driver.wiring import fenced_sinks
from streaming.settings import Settings, SettingsError

pytestmark = pytest.mark.unit


def test_codec_names_map_to_kafka_pythons_compression_type() -> None:
    assert [compression_type(name) for name in COMPRESSIONS] == [None, "gzip", "snappy", "lz4", "zstd"]
    with pytest.raises(CompressionError, match=r"compression must be one of none, gzip, snappy, lz4, zstd, got 'lzma'"):
        compression_type("lzma")
    with pytest.raises(CompressionError, match="got 'GZIP'"):
        compression_type("GZIP")  # Kafka's names are lower case; so are kafka-python's


def test_request_compression_setting_is_checked_and_named_in_the_error() -> None:
    assert Settings.load().request_compression == "zstd"
    assert Settings.load(overrides=["request_compression=none"]).request_compression == "none"
    with pytest.raises(SettingsError) as e:
        Settings.load(overrides=["request_compression=brotli"])
    assert e.value.key == "request_compression"
    assert "must be one of none, gzip, snappy, lz4, zstd, got 'brotli'" in str(e.value)


def test_the_sink_refuses_an_unknown_codec_before_any_connection() -> None:
    # the bootstrap address is never contacted: the codec is checked when the sink is made
    with pytest.raises(CompressionError, match="got 'deflate'"):
        RequestSink("127.0.0.1:1", Fence(1, 0), compression="deflate")


@pytest.mark.parametrize("codec", COMPRESSIONS)
def test_the_controllers_request_sink_gets_the_setting(tmp_path: Path, codec: str) -> None:
    s = Settings.load(overrides=[f"request_compression={codec}"])
    _, request_sink = fenced_sinks(None, Fence(1, 0), s, store_at(tmp_path))
    assert isinstance(request_sink, RequestSink)
    assert request_sink.compression == codec


def test_record_batches_are_checksummed_by_the_c_crc32c() -> None:
    # kafka-python checks a record batch's CRC-32C when it writes and when it reads one, in pure Python unless the
    # crc32c package is there (a dependency: docs/decisions/2026-11-29-crc32c-in-c.md)
    from kafka.record import util

    assert util.crc32c_c is not None
    assert util.calc_crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C (Castagnoli)
    assert util.calc_crc32c(b"123456789") == util.crc32c_py(b"123456789")

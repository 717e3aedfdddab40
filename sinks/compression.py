"""The compression of the messages livectl's producers write: Kafka's producer codecs by name.

kafka-python compresses each record batch on the producer (``compression_type``); consumers decompress
whatever codec a batch names, given the codec's package (``lz4``, ``zstandard``, ``python-snappy``: all
dependencies of livectl, so the simulated brokers and every tool read them). gzip is kafka-python's
zlib at its fixed level 9, the slowest; zstd is the default
(``docs/decisions/2026-11-24-zstd-request-compression.md``; ``bench/compression_cost.py`` weighs the codecs).
"""

from __future__ import annotations

#: the codecs by their setting's name; ``none`` sends record batches uncompressed
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


class CompressionError(ValueError):
    """A compression name livectl does not know."""


def compression_type(name: str) -> str | None:
    """kafka-python's ``compression_type`` for the codec ``name`` (one of :data:`COMPRESSIONS`)."""
    if name not in COMPRESSIONS:
        raise CompressionError(f"compression must be one of {', '.join(COMPRESSIONS)}, got {name!r}")
    return None if name == "none" else name

"""Python's cyclic garbage collector, paused where livectl makes millions of long-lived acyclic objects.

A bucket's state (a 12.5k-partition bucket is ~0.5M small objects: partitions, replicas, leaders, their
tuples) and a batch's decision rows hold no reference cycles; reference counting frees them. But the
collector's generation-2 passes walk every tracked object, and a step that builds a new state (and a
driver that decodes rows) allocates enough to trigger several such passes over all the states a Python
worker keeps (:func:`streaming.query.stateful.cached_state`): measured, 25–30 % of a bucket call's CPU and
five times the driver's row decode (``docs/decisions/2026-11-24-collector-paused.md``).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off inside the block (as it was after). Garbage cycles made inside are
    collected by a later pass, after the block."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

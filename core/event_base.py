"""The base of every event (:mod:`core.events` has the families, :mod:`core.isr_events` the ISR changes a
leader asks for, :mod:`core.zk_path_events` the ZooKeeper paths the driver watches)."""

from __future__ import annotations

from typing import ClassVar


class Event:
    """Base of every event. ``TYPE`` is the JSON ``type``; ``scope`` tells routing what it touches."""

    TYPE: ClassVar[str] = ""
    #: "topic" events go to the bucket of ``self.topic`` (or the topics of ``self.topics()``);
    #: "cluster" events are copied to every bucket.
    SCOPE: ClassVar[str] = "topic"

    def topics(self) -> tuple[str, ...]:
        """The topics this event touches (for routing); empty for cluster-scoped events."""
        return ()

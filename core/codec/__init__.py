"""The one place where events, decisions and the failover snapshot become JSON and JSON becomes values.

:mod:`core.codec.events` writes and reads the versioned JSON form of every event and
:mod:`core.codec.decisions` that of every decision. The event decoders live beside them by family
(:mod:`core.codec.admin`, :mod:`core.codec.broker`, :mod:`core.codec.driver` with :mod:`core.codec.snapshot`,
:mod:`core.codec.zk_paths`), over the strict field readers of :mod:`core.codec.fields` (any JSON) and
:mod:`core.codec.values` (the model's values). This module imports nothing, so that a reader of
:mod:`core.codec.fields` alone (the Kafka formats, say) loads no decoder.
"""

"""The one place where events (and the snapshot they may carry) become JSON and JSON becomes events.

:mod:`core.codec.events` writes and reads the versioned JSON form of every event; the decoders live beside
it by family (:mod:`core.codec.admin`, :mod:`core.codec.broker`, :mod:`core.codec.driver` with
:mod:`core.codec.snapshot`, :mod:`core.codec.zk_paths`), over the strict field readers of
:mod:`core.codec.fields` (any JSON) and :mod:`core.codec.values` (the model's values). This module imports
nothing, so that a reader of :mod:`core.codec.fields` (the Kafka formats, the decisions) loads no decoder.
"""

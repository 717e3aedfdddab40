"""``livectl reassign`` (``kafka-reassign-partitions``): execute with throttles, verify (and clear the
throttles), cancel, list, and follow a reassignment's progress — with honest exit codes.

Throttles are written as Kafka's tool writes them (:mod:`admin.reassign.throttles`). ``--execute`` and
``--cancel`` wait for the controller's answer to the request (as Kafka's tool waits for the
AlterPartitionReassignments response; ``--no-wait`` sends and exits 0 without it): any per-partition error is
exit 1 with one line per failed partition. With ``--wait`` they then follow the reassignment to its end,
printing the partitions done out of the total and, per partition still moving, the adding replicas not yet
in the ISR (a redrawn line with a bar on a terminal, plain lines otherwise). A reassignment that a later one
superseded or cancelled ends in exit 1, reported as such.

The modules, one per concern: :mod:`~admin.reassign.command` (the options, which action runs),
:mod:`~admin.reassign.execute`, :mod:`~admin.reassign.verify`, :mod:`~admin.reassign.cancel`,
:mod:`~admin.reassign.listing`, :mod:`~admin.reassign.generate` (the actions),
:mod:`~admin.reassign.throttles`, :mod:`~admin.reassign.state` (what ZooKeeper says is moving),
:mod:`~admin.reassign.answers` (the controller's answers) and :mod:`~admin.reassign.progress` (``--wait``).
"""

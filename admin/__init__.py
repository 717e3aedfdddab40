"""livectl's admin commands (``livectl topics|reassign|elect-leaders|brokers|broker|controller``, or
``python -m admin``): Kafka tools' options, commands published as :mod:`core.events` JSON on
``livectl.admin``, results followed on ``livectl.admin-results``, reads from ZooKeeper. See
:mod:`admin.cli`."""

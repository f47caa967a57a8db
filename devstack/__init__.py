"""Herald on one machine, for development and the test suite: embedded PostgreSQL and Redis
(the ``embedded`` extra) and ``herald-dev``, the supervisor that runs the whole service on them.

Beside the product, not inside it: ``app`` and ``workers`` never import this package (a
contract in ``make lint`` holds them to it), and ``pip install .`` installs none of its
servers.
"""

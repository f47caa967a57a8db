"""``python -m app.cli``: the ``herald`` command where its script is not on the PATH (the test
suite, ``herald-dev`` and the bench start the API and workers so, with their own interpreter)."""

import sys

from app.cli import main

sys.exit(main())

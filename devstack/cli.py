"""``herald-dev``: the whole service on this machine, or one of ``herald``'s one-off commands
against the dev stack's database.

    herald-dev                            # API, worker, cron stand-in; embedded servers
    herald-dev keys create --tenant acme  # `herald keys create` on the dev stack's database
    herald-dev migrate | purge | secrets rotate | streams halted   # likewise

With HERALD_DATABASE_URL set, a one-off command runs against that database, as ``herald`` would.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from app import cli as herald
from app.core.config import SettingsError, load_settings
from devstack.dev import DevError, dev_stack_database, run_dev

ONE_OFF_COMMANDS = ("migrate", "keys", "purge", "secrets", "streams")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if args and args[0] not in ONE_OFF_COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        settings = load_settings()
        if not args:
            return run_dev(settings)
        if settings.database_url is not None:
            return herald.main(args)
        with dev_stack_database(settings.data_dir) as database_url:
            # The one-off command reads its settings afresh, from the environment.
            os.environ["HERALD_DATABASE_URL"] = database_url
            return herald.main(args)
    except SettingsError as exc:
        print(f"herald-dev: {exc}", file=sys.stderr)
        return 2
    except DevError as exc:
        print(f"herald-dev: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

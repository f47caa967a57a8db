"""``herald reconcile [--every 60s]``: the cron that production must not forget. One run (for a
Kubernetes CronJob: exit status 0 only when the API accepted the run) or a run every interval
(a compose service: a failed run is reported and the next one tried)."""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from typing import Any

import httpx

from app.core.config import Settings, SettingsError

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h)?$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration(text: str) -> float:
    """``60``, ``60s``, ``5m``, ``1h`` -> seconds."""
    found = _DURATION.fullmatch(text.strip())
    if found is None or float(found.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is no duration: say 60s, 5m or 1h")
    return float(found.group(1)) * _UNIT[found.group(2)]


def add_parser(commands: Any) -> None:
    reconcile = commands.add_parser(
        "reconcile", help="ask the API for a reconcile run (the cron), once or --every interval"
    )
    reconcile.add_argument(
        "--every", type=duration, help="keep going: one run per interval (60s, 5m, ...)"
    )


# Why an API refuses the key, in words: the usual cause is a bootstrap admin key (one set as
# HERALD_ADMIN_API_KEY on an API process, herald-dev's among them) used against another API.
_REFUSED = {
    401: (
        "{url} does not know this admin key (401). An admin key is either made by "
        "`herald keys create --admin` (kept in the database: every API on it accepts it) or set "
        "as HERALD_ADMIN_API_KEY on the API process itself, which only that API accepts "
        "(herald-dev's admin key is its own API's). Give herald reconcile the key that API was "
        "started with, or one from `herald keys create --admin`."
    ),
    403: (
        "{url} knows this key, but it is a tenant's (403): a reconcile run is the region's "
        "and needs an admin key (`herald keys create --admin`)."
    ),
}


def run_once(settings: Settings, http: httpx.Client) -> bool:
    assert settings.admin_api_key is not None
    try:
        response = http.post(
            "/v1/reconcile",
            json={"trigger": "cron"},
            headers={"Authorization": f"Bearer {settings.admin_api_key.get_secret_value()}"},
        )
    except httpx.HTTPError as exc:
        print(f"herald reconcile: {settings.api_url} unreachable: {exc}", file=sys.stderr)
        return False
    if response.status_code in _REFUSED:
        said = _REFUSED[response.status_code].format(url=settings.api_url)
        print(f"herald reconcile: {said}", file=sys.stderr)
        return False
    if response.status_code != 202:
        print(f"herald reconcile: {response.status_code} {response.text[:300]}", file=sys.stderr)
        return False
    print(f"reconcile run {response.json()['run_id']} started", flush=True)
    return True


def run(settings: Settings, args: argparse.Namespace) -> int:
    if settings.admin_api_key is None:
        raise SettingsError("herald reconcile needs HERALD_ADMIN_API_KEY (and HERALD_API_URL)")
    with httpx.Client(base_url=settings.api_url, timeout=30) as http:
        if args.every is None:
            return 0 if run_once(settings, http) else 1
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.is_set():
            run_once(settings, http)
            stop.wait(args.every)
    return 0

"""A user's program on the installed Python client, run in a fresh virtual environment by
tests/packaging/test_python_client_package.py: accept a delivery, read it until it has been
delivered, and print what it read (and where the client was imported from) as JSON."""

from __future__ import annotations

import json
import os
import time

import herald_client
from herald_client import Herald

with Herald(os.environ["HERALD_URL"], api_key=os.environ["HERALD_KEY"]) as herald:
    accepted = herald.deliveries.create(os.environ["ENDPOINT_ID"], "package.python", {"n": 1})
    read = herald.deliveries.get(accepted.id)
    deadline = time.monotonic() + 60
    while read.state != "succeeded" and time.monotonic() < deadline:
        time.sleep(0.1)
        read = herald.deliveries.get(accepted.id)
said = {"accepted": accepted.id, "read": read.id, "state": read.state}
print(json.dumps({**said, "client": herald_client.__file__}))

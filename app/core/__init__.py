"""The shared kernel: what every domain, the API and the worker use, and which knows none of
them -- settings (config.py), the database (db.py), the error hierarchy (errors.py), ids, delivery
states, logs, metrics, tracing, the control queue, secrets at rest (sealing.py), whose data a
request may touch (scope.py), the caches every tenant shares, the migrations run from code, and
an endpoint's egress material: its TLS certificates (certificates.py) and its proxy (proxies.py),
checked when the endpoints domain saves them and used when the engine sends.

import-linter holds it to that (pyproject.toml, "The shared kernel knows no domain")."""

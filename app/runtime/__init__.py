"""What the API runs on: the parts built once when its process starts -- the database's
sessions, Redis, the fast-path publisher, the caches -- and handed to every request
(resources.py).

It holds parts of several domains, so it sits above their services; the routes and the HTTP
plumbing (app/api/) sit above it and hand it out. The kernel (app/core/) knows nothing of it."""

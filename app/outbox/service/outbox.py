"""The outbox as other domains use it: wake-ups written in their own transaction (so a
publication commits with the change it publishes), the oldest one's age for the status page,
and pages claimed by a sweep.

Other domains reach the outbox table only through this module (make lint); publishing the rows
is publishing.py's.
"""

from app.outbox.repository.outbox import PendingPublication as PendingPublication
from app.outbox.repository.outbox import claim_unpublished as claim_unpublished
from app.outbox.repository.outbox import insert_wakeups as insert_wakeups
from app.outbox.repository.outbox import oldest_unpublished as oldest_unpublished

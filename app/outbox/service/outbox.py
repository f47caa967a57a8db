"""The outbox as other domains use it: rows written in their own transaction (so a publication
commits with the change it publishes), read back for a delivery's timeline, claimed by a sweep.

Other domains reach the outbox table only through this module (make lint); publishing the rows
is publishing.py's.
"""

from app.outbox.repository.outbox import PendingPublication as PendingPublication
from app.outbox.repository.outbox import Publication as Publication
from app.outbox.repository.outbox import claim_unpublished as claim_unpublished
from app.outbox.repository.outbox import insert_entries as insert_entries
from app.outbox.repository.outbox import publications as publications

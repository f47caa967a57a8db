"""Tables, one module each. Importing this package registers them all on ``Base.metadata``."""

from app.models.api_key import ApiKey
from app.models.attempt import Attempt
from app.models.audit_record import AuditRecord
from app.models.console_secret import ConsoleSecret
from app.models.console_session import ConsoleSession
from app.models.custody_record import CustodyRecord
from app.models.customer import Customer
from app.models.delivery import Delivery
from app.models.endpoint import Endpoint
from app.models.event import Event
from app.models.event_type import EventTypeDef
from app.models.idempotency_key import IdempotencyKey
from app.models.operational_signal import OperationalSignal
from app.models.outbox import OutboxWakeup
from app.models.portal import PortalSession, PortalSettings
from app.models.reconcile_run import ReconcileRun
from app.models.redrive_job import RedriveJob
from app.models.stream import Stream
from app.models.tenant import Tenant
from app.models.transformation import Transformation

__all__ = [
    "ApiKey",
    "Attempt",
    "AuditRecord",
    "ConsoleSecret",
    "ConsoleSession",
    "CustodyRecord",
    "Customer",
    "Delivery",
    "Endpoint",
    "Event",
    "EventTypeDef",
    "IdempotencyKey",
    "OperationalSignal",
    "OutboxWakeup",
    "PortalSession",
    "PortalSettings",
    "ReconcileRun",
    "RedriveJob",
    "Stream",
    "Tenant",
    "Transformation",
]

# Tables the schema keeps for the release before, which may still be running beside this one
# during an upgrade (docs/operations.md, "expand, deploy, contract"); this release's code no
# longer reads or writes them, and the next release's contract migration drops them.
RETIRED_TABLES = frozenset({"outbox"})

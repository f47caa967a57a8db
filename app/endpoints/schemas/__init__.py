"""The endpoints' request and response models: what a tenant sends (requests.py), what the API
answers (responses.py); the programs they carry are programs.py's, their header rules
headers.py's, what they sign and authenticate with credentials.py's, their TLS material
tls.py's, a transformation's trial trials.py's."""

from app.endpoints.schemas.headers import combined_header_fault as combined_header_fault
from app.endpoints.schemas.headers import header_fault as header_fault
from app.endpoints.schemas.polls import PollAck as PollAck
from app.endpoints.schemas.polls import PollAckOut as PollAckOut
from app.endpoints.schemas.polls import PolledDeliveryOut as PolledDeliveryOut
from app.endpoints.schemas.polls import PollPage as PollPage
from app.endpoints.schemas.requests import EndpointCreate as EndpointCreate
from app.endpoints.schemas.requests import EndpointUpdate as EndpointUpdate
from app.endpoints.schemas.responses import EndpointCreated as EndpointCreated
from app.endpoints.schemas.responses import EndpointOut as EndpointOut
from app.endpoints.schemas.responses import EndpointSecret as EndpointSecret
from app.endpoints.schemas.responses import EndpointStats as EndpointStats
from app.endpoints.schemas.responses import EndpointTestReport as EndpointTestReport
from app.endpoints.schemas.responses import EndpointTestStep as EndpointTestStep
from app.endpoints.schemas.responses import RotatedSecret as RotatedSecret
from app.endpoints.schemas.responses import RotatedSigningKey as RotatedSigningKey
from app.endpoints.schemas.responses import WindowStats as WindowStats
from app.endpoints.schemas.responses import current_pause as current_pause
from app.endpoints.schemas.trials import TransformationTrial as TransformationTrial
from app.endpoints.schemas.trials import TransformationTrialOut as TransformationTrialOut
from app.endpoints.schemas.trials import TrialRequest as TrialRequest

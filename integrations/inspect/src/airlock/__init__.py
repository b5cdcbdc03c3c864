"""Airlock for Inspect AI: the approver and the reviewer `airlock/fleet`, whose decisions come
from an Airlock fleet over RabbitMQ.

From a policy file:

```yaml
approvers:
  - name: airlock/fleet
    tools: "*"
    policy: policy.yaml      # the Inspect policy the fleet runs (or a name the workers hold)
    verify_key: fleet.pub    # the fleet's public key (or AIRLOCK_VERIFY_KEY)
```

From Python:

```python
from inspect_ai.approval import ApprovalPolicy
from airlock import fleet_approver

eval(task, approval=[ApprovalPolicy(fleet_approver(policy="policy.yaml", verify_key="fleet.pub"), "*")])
```

Without the fleet's public key (`verify_key`, or `AIRLOCK_VERIFY_KEY`) the approver and the
reviewer refuse to be made, unless told `insecure=True` (or `AIRLOCK_INSECURE=1`): a runner
that does not check the fleet's proofs takes a decision anyone forged.

Layout:
- `approver`, `reviewer`: the two registered objects.
- `request`: building a request for the active sample and asking the fleet.
- `client`: the client shared by the event loop's samples, on the native module `_native`
  (Airlock's Rust client on a thread of its own: the AMQP connection, the reply queue, the
  fleet's proofs, deadlines and cancels).
- `nodes`: the broker's nodes (a comma-separated URL list), checked and named without
  credentials.
- `proof`: the fleet's public keys (`verify_key`), whose proofs the native client checks, or
  `INSECURE`, the explicit choice not to check them.
- `wire`, `decisions`: between Inspect's types and the wire contract (`_proto`).
- `config`: parameters and their environment defaults.
- `hooks`: the shutdown at the end of a run (registered on first use).
"""

from .approver import fleet_approver
from .client import FleetClient, client_for, shutdown
from .errors import AlreadyPending, FleetError, FleetRefused, FleetUnanswered, StepFailed
from .proof import INSECURE, FleetPublicKeys
from .reviewer import fleet_reviewer

__all__ = [
    "INSECURE",
    "AlreadyPending",
    "FleetClient",
    "FleetError",
    "FleetPublicKeys",
    "FleetRefused",
    "FleetUnanswered",
    "StepFailed",
    "client_for",
    "fleet_approver",
    "fleet_reviewer",
    "shutdown",
]

"""The test stack's ML2 mechanism driver: every port binds on every host, without agents.

The stack runs neutron-server alone (no L2 agent, no OVN): Neutron keeps port records (MACs,
fixed IPs, device IDs) for real, and this driver binds each port as a tap device that is
ACTIVE at once, so that Nova can boot servers with ports. ML2 loads mechanism drivers by entry
point only, hence this small distribution (installed into the stack's neutron venv).
"""

from neutron_lib import constants
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api


class BindEverywhere(api.MechanismDriver):
    """Bind every port to its first segment as ``tap``, status ACTIVE."""

    def initialize(self):
        pass

    def bind_port(self, context):
        for segment in context.segments_to_bind:
            context.set_binding(
                segment[api.ID],
                portbindings.VIF_TYPE_TAP,
                {portbindings.CAP_PORT_FILTER: False},
                status=constants.PORT_STATUS_ACTIVE,
            )
            return

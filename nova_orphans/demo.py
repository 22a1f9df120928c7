"""The demo cloud: a simulated Nova plus a libvirt ``test:///`` node for ``compute-1``.

It holds exactly one guest of each kind (and one healthy managed server), with
fixed UUIDs and times so every demo run tells the same story. The libvirt side
is a node XML file read by libvirt's in-process test driver; nothing runs.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import pathlib
import tempfile
from collections.abc import Callable
from xml.sax.saxutils import escape, quoteattr

from nova_orphans import audit
from nova_orphans.decide.policy import Policy
from nova_orphans.fakes.nova import SimulatedNova
from nova_orphans.fakes.services import SimCinder, SimNeutron, SimPlacement
from nova_orphans.model import Kind
from nova_orphans.observe.services.dangers import DangerObserver
from nova_orphans.observe.services.leftovers import LeftoverObserver
from nova_orphans.observe.services.placement import PlacementObserver

HOST = "compute-1"
OTHER_HOST = "compute-2"
UTC = datetime.timezone.utc
#: The demo's "now", to hand to classify/decide (the demo cloud itself reads no clock).
NOW = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
_BOOTED = datetime.datetime(2024, 4, 1, 9, 0, tzinfo=UTC)
_TROUBLE = datetime.datetime(2024, 4, 28, 3, 0, tzinfo=UTC)
NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
PROJECT = "8f2a6c1e4b3d4e5f9a0b1c2d3e4f5a6b"
USER = "0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f"
IMAGE = "a1b2c3d4-0000-4000-8000-000000000001"
#: libvirt's numbers for the test driver's <test:runstate>.
RUNNING, SHUTOFF = 1, 5


@dataclasses.dataclass(frozen=True)
class Guest:
    """One guest of the demo and what the audit should call it.

    ``kind`` None: managed by Nova here, no finding. ``domain_state`` None: no
    libvirt domain on ``compute-1``.
    """

    uuid: str
    name: str
    kind: Kind | None
    domain_state: int | None = RUNNING
    nova_metadata: bool = True


GUESTS = (
    Guest("11111111-1111-4111-8111-111111111111", "web-1", None),
    Guest("22222222-2222-4222-8222-222222222222", "db-old", Kind.DELETED),
    Guest("33333333-3333-4333-8333-333333333333", "batch-7", Kind.UNKNOWN),
    Guest("44444444-4444-4444-8444-444444444444", "app-3", Kind.MISPLACED, SHUTOFF),
    Guest("55555555-5555-4555-8555-555555555555", "operator-test-vm", Kind.FOREIGN,
          nova_metadata=False),
    Guest("66666666-6666-4666-8666-666666666666", "build-agent", Kind.PROTECTED, SHUTOFF),
    Guest("77777777-7777-4777-8777-777777777777", "cache-2", Kind.LOST, domain_state=None),
    Guest("12121212-1212-4121-8121-121212121212", "api-1", None),
    Guest("13131313-1313-4131-8131-131313131313", "api-2", None),
)  # fmt: skip
_BY_NAME = {g.name: g for g in GUESTS}
#: A server elsewhere, so the cloud is not only compute-1.
_BYSTANDER = "88888888-8888-4888-8888-888888888888"
#: db-old's data volume: after the local delete Cinder attached it to web-2 on compute-2,
#: while db-old's guest still runs with it (a shared-volume danger).
SHARED_VOLUME = "99999999-9999-4999-8999-999999999999"
#: The port Neutron gave web-2 later, with batch-7's MAC (an address-conflict danger).
REUSED_PORT = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
#: A server deleted while compute-1 was down whose guest is gone since: what it left behind
#: (its instance directory, port, volume attachment and allocation) are the leftovers.
LEFT_BEHIND = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
LEFT_PORT = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
LEFT_VOLUME = "dddddddd-dddd-4ddd-8ddd-dddddddddddd"
LEFT_ATTACHMENT = "eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee"
#: A Zun container's port on compute-1 (``compute:kuryr``): not Nova's, never a command.
CONTAINER = "f0f0f0f0-f0f0-4f0f-8f0f-f0f0f0f0f0f0"
CONTAINER_PORT = "f1f1f1f1-f1f1-4f1f-8f1f-f1f1f1f1f1f1"
#: The looks the demo makes, an hour apart, ending at ``NOW``: a leftover's command is told
#: once it was seen in ``sightings_required`` looks across ``grace_period`` (rule 22).
LOOKS = 3


@dataclasses.dataclass(frozen=True)
class DemoWorld:
    """Everything the demo command needs: Nova, libvirt, host, time, expectations."""

    nova: SimulatedNova
    node_xml: pathlib.Path
    host: str
    now: datetime.datetime
    guests: tuple[Guest, ...]
    #: compute-1's nova-compute state_path: its compute_id names Nova's node of compute-1.
    state_path: pathlib.Path
    placement: SimPlacement = dataclasses.field(default_factory=SimPlacement)
    cinder: SimCinder = dataclasses.field(default_factory=SimCinder)
    neutron: SimNeutron = dataclasses.field(default_factory=SimNeutron)

    @property
    def instances_path(self) -> str:
        """compute-1's instances_path (the demo's own directory)."""
        return str(self.state_path / "instances")

    @property
    def services(self) -> audit.Services:
        """Placement, Cinder and Neutron of the demo cloud, as the audit asks them."""
        return audit.Services(
            PlacementObserver(self.placement),
            DangerObserver(self.cinder, self.neutron),
            LeftoverObserver(self.neutron, self.cinder, self.placement),
        )

    def looks(self, observe: Callable[[datetime.datetime], audit.HostAudit]) -> audit.HostAudit:
        """The last of ``LOOKS`` audits an hour apart (``observe(now)`` makes one), its
        leftovers told with the sightings of the looks before (docs/design.md rule 22)."""
        policy = Policy()
        state = audit.JournalState()
        report = None
        for hours in range(LOOKS - 1, -1, -1):
            report = observe(self.now - datetime.timedelta(hours=hours))
            report, sightings = audit.tell(
                report,
                state,
                policy,
                brake=audit.brake(report, policy),
                # NOTE: the demo's host is this machine, its instances_path the host's own.
                host_instances_path=self.instances_path,
                instances_path=self.instances_path,
            )
            state = dataclasses.replace(state, leftover_sightings=sightings)
        assert report is not None
        return report

    @property
    def libvirt_uri(self) -> str:
        """The URI for ``libvirt.open``: the test driver reading ``node_xml``."""
        return f"test://{self.node_xml}"

    @property
    def expected(self) -> dict[str, Kind]:
        """The kind the audit should report for each guest that is a finding."""
        return {g.uuid: g.kind for g in self.guests if g.kind is not None}


def build(directory: str | os.PathLike[str] | None = None) -> DemoWorld:
    """Build the demo cloud and write the libvirt node XML into ``directory``.

    Without ``directory`` a fresh temporary directory is used (the caller may
    delete it when done).
    """
    nova, domain_names = _build_nova()
    folder = pathlib.Path(directory or tempfile.mkdtemp(prefix="nova-orphans-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    node_xml = folder.resolve() / "compute-1.xml"
    node_xml.write_text(node_xml_text(domain_names), encoding="utf-8")
    # NOTE: Nova's fake driver read through libvirt's test driver has no hypervisor to
    # compare; the compute_id nova-compute would have written ties the demo to compute-1.
    (folder / "compute_id").write_text(nova.computes[HOST].node_uuid, encoding="utf-8")
    left = folder / "instances" / LEFT_BEHIND
    left.mkdir(parents=True, exist_ok=True)
    (left / "disk").write_bytes(b"\1" * 65536)
    (left / "console.log").write_text("login:\n", encoding="utf-8")
    return DemoWorld(nova, node_xml, HOST, NOW, GUESTS, folder.resolve(), *_services(nova))


def _services(nova: SimulatedNova) -> tuple[SimPlacement, SimCinder, SimNeutron]:
    """What Placement, Cinder and Neutron say after compute-1's troubles."""
    placement = SimPlacement()
    # NOTE: Placement still counts web-1, api-1, api-2, the soft-deleted build-agent, the
    # lost cache-2 and the left-behind server, whose delete never reached it (512 MiB,
    # 1 vCPU, 1 GB each); the local deletes released the others.
    node = nova.computes[HOST].node_uuid
    placement.add_provider(
        HOST,
        node,
        {
            "VCPU": {"total": 4, "reserved": 0, "allocation_ratio": 4.0},
            "MEMORY_MB": {"total": 8192, "reserved": 512, "allocation_ratio": 1.0},
            "DISK_GB": {"total": 100, "reserved": 0, "allocation_ratio": 1.0},
        },
        {"VCPU": 6, "MEMORY_MB": 3072, "DISK_GB": 6},
    )
    small = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    for name in ("web-1", "api-1", "api-2", "cache-2", "build-agent"):
        placement.allocate(node, _BY_NAME[name].uuid, dict(small))
    placement.allocate(node, LEFT_BEHIND, dict(small))
    cinder = SimCinder()
    cinder.add_volume(SHARED_VOLUME, "in-use", ((_BYSTANDER, OTHER_HOST),))
    cinder.add_attachment(LEFT_ATTACHMENT, LEFT_VOLUME, LEFT_BEHIND, "attached", HOST)
    neutron = SimNeutron()
    batch = _BY_NAME["batch-7"]
    neutron.add_port(REUSED_PORT, _mac(batch), _BYSTANDER, ("10.0.0.23",), OTHER_HOST)
    neutron.add_port(LEFT_PORT, "fa:16:3e:00:00:b0", LEFT_BEHIND, ("10.0.0.31",), HOST)
    neutron.add_port(
        CONTAINER_PORT, "fa:16:3e:00:00:c0", CONTAINER, ("10.0.0.32",), HOST, zone="kuryr"
    )
    return placement, cinder, neutron


def _mac(guest: Guest) -> str:
    return f"fa:16:3e:00:00:{GUESTS.index(guest) + 1:02x}"


def _build_nova() -> tuple[SimulatedNova, dict[str, str]]:
    """The Nova side of the story, and the libvirt name of each guest's domain."""
    nova = SimulatedNova(start=_BOOTED)
    nova.add_compute(HOST, hypervisor_type="fake")
    nova.add_compute(OTHER_HOST, hypervisor_type="fake")
    names = {g.uuid: g.name for g in GUESTS}
    for minute, guest in enumerate(g for g in GUESTS if g.nova_metadata):
        at = _BOOTED + datetime.timedelta(minutes=minute)
        nova.boot(HOST, guest.name, guest.uuid, project_id=PROJECT, user_id=USER, at=at)
        # The libvirt driver names domains by instance_name_template, instance-%08x.
        names[guest.uuid] = f"instance-{nova.server(guest.uuid).db_id:08x}"
    nova.boot(OTHER_HOST, "web-2", _BYSTANDER, project_id=PROJECT, user_id=USER, at=_BOOTED)
    nova.boot(HOST, "old-build", LEFT_BEHIND, project_id=PROJECT, user_id=USER, at=_BOOTED)
    # compute-1 was down twice; a server was deleted each time (local delete).
    # The older deleted row has since been archived, the newer one has not.
    nova.set_compute(HOST, up=False, forced_down=True)
    nova.local_delete(_BY_NAME["batch-7"].uuid, at=_TROUBLE - datetime.timedelta(days=7))
    nova.local_delete(_BY_NAME["db-old"].uuid, at=_TROUBLE)
    # old-build was deleted too; its guest is gone since, its leftovers stay.
    nova.local_delete(LEFT_BEHIND, at=_TROUBLE)
    nova.set_compute(HOST, up=True, forced_down=False)
    nova.archive(before=_TROUBLE - datetime.timedelta(days=1))
    # The migration finished and Nova recorded it completed, but the source
    # domain was left defined (shut off) on compute-1.
    nova.live_migrate(_BY_NAME["app-3"].uuid, OTHER_HOST, at=_TROUBLE + datetime.timedelta(hours=1))
    nova.soft_delete(_BY_NAME["build-agent"].uuid, at=_TROUBLE + datetime.timedelta(hours=2))
    return nova, names


def node_xml_text(domain_names: dict[str, str]) -> str:
    """The test driver's node XML holding every guest that has a domain here."""
    domains = [_domain_xml(g, domain_names[g.uuid]) for g in GUESTS if g.domain_state]
    return "<node>\n" + "".join(domains) + "</node>\n"


def _domain_xml(guest: Guest, domain_name: str) -> str:
    disk = f"/var/lib/nova/instances/{guest.uuid}/disk"
    return f"""\
<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>
  <name>{escape(domain_name)}</name>
  <uuid>{guest.uuid}</uuid>
  <memory unit='KiB'>524288</memory>
  <vcpu>1</vcpu>
  <os><type>hvm</type></os>
{_metadata_xml(guest) if guest.nova_metadata else ""}\
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file={quoteattr(disk)}/>
      <target dev='vda' bus='virtio'/>
    </disk>
{_volume_xml(guest)}\
    <interface type='bridge'>
      <mac address={quoteattr(_mac(guest))}/>
      <source bridge='br-int'/>
      <virtualport type='openvswitch'/>
      <target dev='tap{guest.uuid[:11]}'/>
      <model type='virtio'/>
    </interface>
  </devices>
  <test:runstate>{guest.domain_state}</test:runstate>
</domain>
"""


def _volume_xml(guest: Guest) -> str:
    """db-old's data volume (RBD, as Nova attaches a Cinder volume: its id as serial)."""
    if guest.name != "db-old":
        return ""
    return f"""\
    <disk type='network' device='disk'>
      <source protocol='rbd' name='volumes/volume-{SHARED_VOLUME}'/>
      <target dev='vdb' bus='virtio'/>
      <serial>{SHARED_VOLUME}</serial>
    </disk>
"""


def _metadata_xml(guest: Guest) -> str:
    return f"""\
  <metadata>
    <nova:instance xmlns:nova="{NOVA_NS}">
      <nova:package version="29.0.1"/>
      <nova:name>{escape(guest.name)}</nova:name>
      <nova:creationTime>{_BOOTED:%Y-%m-%d %H:%M:%S}</nova:creationTime>
      <nova:flavor name="m1.small">
        <nova:memory>512</nova:memory><nova:disk>1</nova:disk><nova:swap>0</nova:swap>
        <nova:ephemeral>0</nova:ephemeral><nova:vcpus>1</nova:vcpus>
      </nova:flavor>
      <nova:owner>
        <nova:user uuid="{USER}">demo</nova:user>
        <nova:project uuid="{PROJECT}">demo</nova:project>
      </nova:owner>
      <nova:root type="image" uuid="{IMAGE}"/>
    </nova:instance>
  </metadata>
"""

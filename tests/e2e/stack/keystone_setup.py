"""Fill the stack's Keystone: the service catalog, the service users, nova-orphans' user.

Run after ``keystone-manage bootstrap`` (user ``admin``, project ``admin``, role ``admin``) with
the stack's nova venv python: ``keystone_setup.py STATE ADMIN_PASSWORD SERVICE_PASSWORD``.

- Services and public endpoints (RegionOne) for compute, placement, image, network and
  block-storage.
- Project ``service`` and the service user ``nova`` with the roles ``admin`` and ``service``
  there: every service of the stack uses it (keystonemiddleware, and their calls to each
  other). One user for all: each Keystone call costs about half a second on a busy 2-core
  machine.
- The least-privilege setup of docs/admin/least-privilege.md: role
  ``nova-orphans-reader`` and user ``nova-orphans`` (project ``service``) holding that role and
  nothing else.

Writes STATE/keystone.json with what the tests need (URLs, names, passwords, IDs).
"""

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

KEYSTONE = "http://127.0.0.1:5000/v3"
ENDPOINTS = {
    # service type: (name, public URL)
    "compute": ("nova", "http://127.0.0.1:8774/v2.1"),
    "placement": ("placement", "http://127.0.0.1:8778"),
    "image": ("glance", "http://127.0.0.1:9292"),
    "network": ("neutron", "http://127.0.0.1:9696"),
    "block-storage": ("cinder", "http://127.0.0.1:8776/v3"),
}
SERVICE_USER = "nova"
READER_ROLE = "nova-orphans-reader"
READER_USER = "nova-orphans"
READER_PASSWORD = "nova-orphans-secret"


class Keystone:
    def __init__(self, password):
        auth = v3.Password(
            auth_url=KEYSTONE,
            username="admin",
            password=password,
            project_name="admin",
            user_domain_id="default",
            project_domain_id="default",
        )
        self.session = ks_session.Session(auth=auth, timeout=30)

    def call(self, method, path, body=None):
        resp = self.session.request(
            KEYSTONE + path, method, json=body, endpoint_filter=None, raise_exc=True
        )
        return resp.json() if resp.content else None

    def create(self, kind, body):
        return self.call("POST", f"/{kind}s", {kind: body})[kind]

    def find(self, kind, name):
        found = self.call("GET", f"/{kind}s?name={name}")[f"{kind}s"]
        return found[0] if found else None

    def grant(self, project_id, user_id, role_id):
        self.call("PUT", f"/projects/{project_id}/users/{user_id}/roles/{role_id}")


def main():
    state, admin_password, service_password = sys.argv[1:4]
    t0 = time.monotonic()
    ks = Keystone(admin_password)
    admin_role = ks.find("role", "admin")
    # keystone-manage bootstrap makes the roles admin, manager, member, reader and service.
    service_role = ks.find("role", "service")
    service = ks.create("project", {"name": "service", "domain_id": "default"})

    def catalog(service_type):
        name, url = ENDPOINTS[service_type]
        svc = ks.create("service", {"name": name, "type": service_type, "enabled": True})
        ks.create(
            "endpoint",
            {"service_id": svc["id"], "interface": "public", "url": url, "region_id": "RegionOne"},
        )

    def service_user():
        user = ks.create(
            "user", {"name": SERVICE_USER, "password": service_password, "domain_id": "default"}
        )
        ks.grant(service["id"], user["id"], admin_role["id"])
        # NOTE: nova-api calls Neutron, Cinder and Placement with the user's token plus its
        # own as X-Service-Token; their keystonemiddleware ([keystone_authtoken]
        # service_token_roles_required, True by default in the stack's keystonemiddleware
        # 13) rejects the pair with 401 unless that service token has the role "service",
        # and Nova hands the 401 on to its caller: every GET /servers/detail that lists a
        # server (Nova asks Neutron for its security groups) failed for Keystone users.
        ks.grant(service["id"], user["id"], service_role["id"])

    def reader_user():
        role = ks.create("role", {"name": READER_ROLE})
        user = ks.create(
            "user", {"name": READER_USER, "password": READER_PASSWORD, "domain_id": "default"}
        )
        ks.grant(service["id"], user["id"], role["id"])
        return role, user

    with ThreadPoolExecutor(4) as pool:
        jobs = [pool.submit(catalog, t) for t in ENDPOINTS]
        jobs.append(pool.submit(service_user))
        readers = pool.submit(reader_user)
        for job in jobs:
            job.result()
        role, reader = readers.result()
    info = {
        "auth_url": KEYSTONE,
        "region": "RegionOne",
        "admin": {"username": "admin", "password": admin_password, "project_name": "admin"},
        "reader": {
            "username": READER_USER,
            "password": READER_PASSWORD,
            "project_name": "service",
            "user_id": reader["id"],
            "project_id": service["id"],
            "role": READER_ROLE,
            "role_id": role["id"],
        },
    }
    tmp = os.path.join(state, "keystone.json.tmp")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(state, "keystone.json"))
    print(f"keystone set up in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()

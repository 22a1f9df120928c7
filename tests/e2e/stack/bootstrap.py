"""Create what the tests boot from: a 1 KiB raw image in Glance, a small flavor, and a
shared Neutron network ``e2e-net`` with the IPv4 subnet 10.20.0.0/24.

Writes STATE/stack.json with their IDs. Run with the stack's nova venv python.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

TOKEN = "admin:admin"
GLANCE = "http://127.0.0.1:9292"
NOVA = "http://127.0.0.1:8774/v2.1"
NEUTRON = "http://127.0.0.1:9696/v2.0"
FLAVOR_ID = "e2e-tiny"


def call(method, url, body=None, raw=None, ctype="application/json", timeout=30):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("X-Auth-Token", TOKEN)
    req.add_header("OpenStack-API-Version", "compute 2.1")
    if data is not None:
        req.add_header("Content-Type", ctype)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        text = resp.read()
        return resp.status, (json.loads(text) if text.strip() else None)


def main():
    state = sys.argv[1]
    t0 = time.monotonic()
    _, img = call(
        "POST",
        GLANCE + "/v2/images",
        {
            "name": "e2e-raw-1k",
            "disk_format": "raw",
            "container_format": "bare",
            "visibility": "public",
        },
    )
    call(
        "PUT",
        GLANCE + "/v2/images/{}/file".format(img["id"]),
        raw=b"\0" * 1024,
        ctype="application/octet-stream",
    )
    for _ in range(100):
        _, got = call("GET", GLANCE + "/v2/images/{}".format(img["id"]))
        if got["status"] == "active":
            break
        time.sleep(0.2)
    else:
        raise SystemExit("image did not become active: {}".format(got["status"]))
    try:
        call(
            "POST",
            NOVA + "/flavors",
            {"flavor": {"name": "e2e-tiny", "ram": 64, "vcpus": 1, "disk": 1, "id": FLAVOR_ID}},
        )
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise
    _, net = call("POST", NEUTRON + "/networks", {"network": {"name": "e2e-net", "shared": True}})
    _, subnet = call(
        "POST",
        NEUTRON + "/subnets",
        {
            "subnet": {
                "name": "e2e-subnet",
                "network_id": net["network"]["id"],
                "cidr": "10.20.0.0/24",
                "ip_version": 4,
                "enable_dhcp": False,
            }
        },
    )
    info = {
        "image_id": img["id"],
        "flavor_id": FLAVOR_ID,
        "network_id": net["network"]["id"],
        "subnet_id": subnet["subnet"]["id"],
        "state_dir": state,
    }
    tmp = os.path.join(state, "stack.json.tmp")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(state, "stack.json"))
    print(f"bootstrap done in {time.monotonic() - t0:.1f} s: {info}")


if __name__ == "__main__":
    main()

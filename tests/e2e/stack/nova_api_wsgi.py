"""gunicorn entry point for nova-api: Nova parses sys.argv, so hide gunicorn's arguments."""

import sys

sys.argv = sys.argv[:1]
from nova.wsgi.osapi_compute import application  # noqa: E402,F401

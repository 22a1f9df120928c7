"""gunicorn entry point for the stack's APIs: ``wsgi_app:application``.

``STACK_WSGI_APP`` names the service's own WSGI application (``module:attribute``, e.g.
``nova.wsgi.osapi_compute:application``). Nova, Keystone, Neutron and Cinder parse
``sys.argv`` when they load, so gunicorn's arguments are hidden from them first, and replaced
by ``STACK_WSGI_ARGV`` when set (Cinder finds its configuration only through
``--config-file``).

For Placement (``placement.wsgi.api:application``) the Keystone auth filter Placement builds
is wrapped in the stack's ``fake_auth`` filter, which still takes the older tests'
``user:project`` tokens (see fake_auth.py).
"""

import importlib
import os
import shlex
import sys

import fake_auth

sys.argv = sys.argv[:1] + shlex.split(os.environ.get("STACK_WSGI_ARGV", ""))
_module, _, _attribute = os.environ["STACK_WSGI_APP"].partition(":")
if _module.startswith("placement."):
    from placement import auth as _placement_auth

    _placement_auth.filter_factory = fake_auth.wrapping(_placement_auth.filter_factory)
application = getattr(importlib.import_module(_module), _attribute)

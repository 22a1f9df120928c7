"""Paste filter in front of the stack's APIs: real Keystone tokens, plus the old test tokens.

A token ``user:project`` (it has a ``:``, which a Keystone token never has) becomes
``X-User-Id``/``X-Project-Id``/``X-Roles`` (the user ``admin`` gets ``admin,member,reader``,
anyone else ``member,reader``); an empty part is rejected with 401. Every other token goes to
keystonemiddleware's ``auth_token``, configured from the service's ``[keystone_authtoken]``
section, which validates it against the stack's real Keystone. The service's own
``keystonecontext`` filter then builds the request context from the headers either way.

NOTE: the ``user:project`` path is kept for the tests written before Keystone was in the stack
(their clients send ``admin:admin``); new tests authenticate with Keystone.
"""

import json

from keystonemiddleware import auth_token


def _unauthorized(start_response):
    body = json.dumps(
        {
            "error": {
                "code": 401,
                "title": "Unauthorized",
                "message": "The request you have made requires authentication.",
            }
        }
    )
    start_response(
        "401 Unauthorized",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("WWW-Authenticate", 'Keystone uri="http://127.0.0.1:5000"'),
        ],
    )
    return [body.encode()]


_IDENTITY_HEADERS = (
    "HTTP_X_USER_ID",
    "HTTP_X_USER",
    "HTTP_X_USER_NAME",
    "HTTP_X_PROJECT_ID",
    "HTTP_X_TENANT_ID",
    "HTTP_X_TENANT",
    "HTTP_X_PROJECT_NAME",
    "HTTP_X_ROLES",
    "HTTP_X_ROLE",
    "HTTP_X_SERVICE_CATALOG",
    "HTTP_X_IDENTITY_STATUS",
)


def filter_factory(global_conf, **local_conf):
    """Paste entry point: ``user:project`` tokens here, the others to keystonemiddleware."""
    return wrapping(auth_token.filter_factory)(global_conf, **local_conf)


def wrapping(keystone_filter_factory):
    """A filter factory taking ``user:project`` tokens and passing every other request to
    the filter ``keystone_filter_factory`` makes (keystonemiddleware's or a service's own
    subclass of it, like Placement's, which lets version discovery through unauthenticated)."""

    def factory(global_conf, **local_conf):
        return _dual(keystone_filter_factory(global_conf, **local_conf))

    return factory


def _dual(keystone_filter):
    def _filter(app):
        keystone = keystone_filter(app)

        def middleware(environ, start_response):
            token = environ.get("HTTP_X_AUTH_TOKEN", "")
            if ":" not in token:
                # NOTE: a Keystone token never has a ":"; no token at all goes there too.
                return keystone(environ, start_response)
            user, _, project = token.partition(":")
            if not user or not project:
                return _unauthorized(start_response)
            roles = "admin,member,reader" if user == "admin" else "member,reader"
            for key in _IDENTITY_HEADERS:
                environ.pop(key, None)
            environ["HTTP_X_IDENTITY_STATUS"] = "Confirmed"
            environ["HTTP_X_USER_ID"] = user
            environ["HTTP_X_USER_NAME"] = user
            environ["HTTP_X_PROJECT_ID"] = project
            environ["HTTP_X_PROJECT_NAME"] = project
            environ["HTTP_X_ROLES"] = roles
            environ["HTTP_X_SERVICE_CATALOG"] = "[]"
            return app(environ, start_response)

        return middleware

    return _filter

"""Test-only paste filter standing in for keystonemiddleware's authtoken.

``X-Auth-Token: user:project`` becomes ``X-User-Id``/``X-Project-Id``/``X-Roles`` (the user
``admin`` gets ``admin,member,reader``, anyone else ``member,reader``); Nova's own
``keystonecontext`` filter builds the request context from those headers. A token without a
``:`` or with an empty part is rejected with 401, like an invalid Keystone token.
"""

import json


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
            ("WWW-Authenticate", 'Keystone uri="http://127.0.0.1:1"'),
        ],
    )
    return [body.encode()]


def filter_factory(global_conf, **local_conf):
    def _filter(app):
        def middleware(environ, start_response):
            token = environ.get("HTTP_X_AUTH_TOKEN", "")
            user, sep, project = token.partition(":")
            if not sep or not user or not project:
                return _unauthorized(start_response)
            roles = "admin,member,reader" if user == "admin" else "member,reader"
            for key in (
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
            ):
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

"""The hosts' reports read schema-first: the schema the package ships is the one copy of
their format, and a document it refuses is refused with its first error, in one line.

NOTE: reports are hostile input (docs/design.md rule 20). What a report may hold (every
type, required key, kind, state and pattern, the leftovers' subjects, how many) is said once,
in ``report.schema.json``: ``audit --format json`` and the agent's report file are held to it
by the tests, and the reader (``reports.py``) validates each document against it before it
maps a single field, so a check the schema makes is never made by hand. The schema is the
package's own resource (``nova_orphans/data``, what the wheel ships), never a path of the
checkout, and its validator (the draft it declares) is built once. The refusal names the
JSON path and the rule broken, quoting at most ``report_json.SHOWN`` characters of the
report's own text (``report_json.shown``).
"""

from __future__ import annotations

import functools
import importlib.resources
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any

from nova_orphans.fleet.report_json import shown

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

#: The package holding the schema, and its file: the resource the reader validates against.
PACKAGE = "nova_orphans.data"
RESOURCE = "report.schema.json"
#: The schema's definition of one host's report (what ``audit --format json`` writes).
HOST_REPORT = "host_report"
#: The errors looked at to choose the one told (a document wrong everywhere has thousands).
MAX_ERRORS = 200
#: The most characters of a refusal's reason.
REASON_MOST = 300
#: A key shown as ``.key`` in a path; any other is quoted (``['…']``).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
#: The keywords whose refusal quotes the schema's title of the value (``'x' is no UUID``).
_SHAPED = frozenset({"pattern", "minLength", "maxLength", "not"})
#: The keywords that only say an object has keys its schema does not name.
_EXTRA = frozenset({"additionalProperties", "unevaluatedProperties"})


def resource() -> Traversable:
    """The schema file the package ships (``nova-orphans report-schema`` prints it)."""
    return importlib.resources.files(PACKAGE).joinpath(RESOURCE)


@functools.cache
def schema() -> dict[str, Any]:
    """The shipped schema, read once."""
    loaded: dict[str, Any] = json.loads(resource().read_text(encoding="utf-8"))
    return loaded


def readable_version() -> int:
    """The ``schema_version`` this reader reads: the one the schema names."""
    version: int = schema()["$defs"]["versions"]["properties"]["schema_version"]["const"]
    return version


@functools.cache
def _validator() -> Validator:
    # NOTE: imported here, not with the module: only a report-reading command pays for it.
    import jsonschema

    whole = schema()
    kind = jsonschema.validators.validator_for(whole)
    kind.check_schema(whole)
    # NOTE: evolved to the host report's definition, its $refs resolved in the whole schema.
    return kind(whole).evolve(schema=whole["$defs"][HOST_REPORT])


def refusal(document: Any) -> str | None:
    """Why ``document`` is no host report by the schema (its first error), or None."""
    errors = list(itertools.islice(_validator().iter_errors(document), MAX_ERRORS))
    if not errors:
        return None
    error = _told(errors)
    return shown(f"{where(error.absolute_path)}: {_phrase(error)}", REASON_MOST)


def _told(errors: Sequence[ValidationError]) -> ValidationError:
    """The first error, skipping an object's "unexpected keys" when an error lies inside it
    (a subschema that failed evaluated none of its keys: they are all "unexpected"), and
    inside ``oneOf``/``anyOf`` the error of the branch the value's type fits."""
    error = next((e for e in errors if not _shadowed(e, errors)), errors[0])
    while error.validator in ("oneOf", "anyOf") and error.context:
        fitting = [e for e in error.context if not (e.validator == "type" and not e.relative_path)]
        if not fitting:
            break
        error = next((e for e in fitting if not _shadowed(e, fitting)), fitting[0])
    return error


def _shadowed(error: ValidationError, errors: Sequence[ValidationError]) -> bool:
    path = list(error.absolute_path)
    return error.validator in _EXTRA and any(
        other is not error and list(other.absolute_path)[: len(path)] == path for other in errors
    )


def where(path: Iterable[Any]) -> str:
    """A JSON path as a reason names it: ``findings[3].uuid``; the document itself: ``report``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _NAME.fullmatch(str(part)):
            text += f".{part}" if text else str(part)
        else:
            text += f"[{shown(repr(part))}]"
    return text or "report"


def _phrase(error: ValidationError) -> str:
    keyword, expected = error.validator, error.validator_value
    value = _value(error.instance)
    title = error.schema.get("title") if isinstance(error.schema, dict) else None
    if keyword in _SHAPED and title:
        return f"{value} is no {title}"
    if keyword == "type":
        return f"{value} is not of type {_types(expected)}"
    if keyword in ("oneOf", "anyOf") and error.context:
        types = [e.validator_value for e in error.context if e.validator == "type"]
        return f"{value} is not of type {' or '.join(_types(t) for t in types)}"
    if keyword == "enum":
        return f"{value} is not one of {', '.join(repr(v) for v in expected)}"
    if keyword == "const":
        return f"{value} is not {expected!r}"
    if keyword == "minimum":
        return f"{value} is less than {expected}"
    if keyword == "maxItems":
        return f"more than {expected} items"
    if keyword == "pattern":
        return f"{value} does not match {expected!r}"
    # NOTE: "required" names the schema's key; the others quote the report's keys: bounded.
    return shown(str(error.message), REASON_MOST // 2)


def _types(expected: Any) -> str:
    return " or ".join(expected) if isinstance(expected, list) else str(expected)


def _value(instance: Any) -> str:
    if isinstance(instance, dict):
        return "an object"
    if isinstance(instance, list):
        return "an array"
    return shown(repr(instance))

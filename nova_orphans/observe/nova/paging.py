"""How far a listing of Nova's is followed: its pages, next links and bounds (docs/design.md §8)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from nova_orphans.observe.errors import NovaBadAnswer
from nova_orphans.observe.nova.api import list_in

PAGE_SIZE = 1000
#: The most entries one listing may hold: more servers (or deleted rows, or migrations) than
#: the cloud of one Nova API holds. NOTE: every listing the tool asks for is of one host or
#: of the changes of a few minutes, except a fleet's; a listing still going past this is
#: taken for endless (docs/design.md §8).
MAX_LISTED = 100_000
#: The most pages one listing may take. NOTE: Nova's ``[api] max_limit`` can shrink a page
#: below ``limit``; from a ``max_limit`` of 100 on, ``MAX_LISTED`` comes first.
MAX_PAGES = 1000


def paged(
    get: Callable[[str], Any], path: str, key: str, query: dict[str, str], page_size: int
) -> Iterator[dict[str, Any]]:
    """Every item of a listing, following Nova's next links until there are none.

    ``get`` asks for one page (its answer checked); ``page_size`` is the ``limit`` asked.

    NOTE: Nova clamps ``limit`` to its ``[api] max_limit``, so a page shorter
    than asked is not the end of the listing: only a page without a
    ``<key>_links`` rel=next is (docs/design.md rule 17). A next link must
    continue after the page's last entry (``_next_marker``), so an endless or
    looping one fails at once; a listing of fresh entries without end fails at
    ``MAX_LISTED`` entries or ``MAX_PAGES`` pages, whichever comes first.
    """
    base = dict(query, limit=str(page_size))
    request = f"{path}?{urllib.parse.urlencode(base)}"
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        body = get(request)
        page = list_in(body, key, request)
        if len(page) > page_size:
            raise NovaBadAnswer(request=request, reason="page longer than the limit asked")
        for item in page:
            ident = _ident(item)
            if ident in seen:
                raise NovaBadAnswer(request=request, reason=f"{ident} listed twice")
            seen.add(ident)
        if len(seen) > MAX_LISTED:
            raise NovaBadAnswer(
                request=f"{path}?{urllib.parse.urlencode(base)}",
                reason=f"more than {MAX_LISTED} entries, more than a listing can hold",
            )
        yield from page
        marker = _next_marker(body, key, path, base, request)
        if marker is None:
            return
        request = f"{path}?{urllib.parse.urlencode(dict(base, marker=marker))}"
    raise NovaBadAnswer(
        request=f"{path}?{urllib.parse.urlencode(base)}",
        reason=f"still a next link after {MAX_PAGES} pages",
    )


def _next_marker(
    body: dict[str, Any], key: str, path: str, query: dict[str, str], request: str
) -> str | None:
    """The marker of the page's rel=next link, or None when it has none.

    NOTE: the link must continue the same listing (same path and query, a new
    marker); we request it ourselves so that only the marker comes from Nova.
    """
    links = body.get(f"{key}_links", [])
    if not isinstance(links, list):
        raise NovaBadAnswer(request=request, reason=f"'{key}_links' is not a list")
    hrefs = [str(link.get("href", "")) for link in links
             if isinstance(link, dict) and link.get("rel") == "next"]  # fmt: skip
    if not hrefs:
        return None
    url = urllib.parse.urlsplit(hrefs[0])
    params = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
    marker = params.pop("marker", "")
    if not url.path.endswith(path) or not marker or params != query:
        raise NovaBadAnswer(
            request=request, reason=f"the next link {hrefs[0]} does not continue the listing"
        )
    # NOTE: common.ViewBuilder._get_collection_links: Nova links a next page only to a
    # full page, with the id of its last entry as the marker. Any other link (after an
    # empty page, to an entry already listed or never listed) does not advance.
    page = body.get(key)
    if not page:
        raise NovaBadAnswer(request=request, reason="a next link after an empty page")
    if marker != _ident(page[-1]):
        raise NovaBadAnswer(
            request=request, reason=f"the next link's marker {marker} is not the page's last entry"
        )
    return marker


def _ident(item: dict[str, Any]) -> str:
    """The id a listing's marker names an entry by (a migration's uuid, not its number)."""
    return str(item.get("uuid") or item.get("id"))

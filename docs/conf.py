"""Sphinx configuration of the nova-orphans documentation.

Build: ``sphinx-build -W -b html docs docs/_build/html`` (warnings are errors).
The configuration reference is generated from the options (``oslo_config.sphinxext``) and the
command-line reference from the parser (``sphinxarg.ext``), so neither is written by hand.
"""

from __future__ import annotations

import pathlib
import sys

from nova_orphans.version import tool_version

# NOTE: _ext holds cli_help, the parser the command-line reference documents.
sys.path.insert(0, str(pathlib.Path(__file__).parent / "_ext"))

project = "nova-orphans"
copyright = "nova-orphans authors; Apache-2.0"
release = version = tool_version()

extensions = [
    "myst_parser",
    "oslo_config.sphinxext",
    "sphinxarg.ext",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# NOTE: test-stack.md is included by testing.md; schema/ holds the JSON Schema the wheel ships.
exclude_patterns = ["_build", "test-stack.md", "schema"]

# NOTE: "#identity-..." links between and within pages name headings by their slug.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

html_theme = "alabaster"
html_title = f"nova-orphans {release}"
html_static_path: list[str] = []

# NOTE: help texts and examples say "--reports", "'-'": print them as written, not as dashes
# and curly quotes.
smartquotes = False

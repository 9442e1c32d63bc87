"""Regenerate the generated blocks of docs/ARCHITECTURE.md from the code (a test checks them).

    python docs/make_architecture.py

A block sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->``; NAME is one of
:data:`BLOCKS` (the bundle fields from :func:`edge.bundle_schema.field_table`, the flag bits
from :mod:`edge.flags`). Everything else on the page is written by hand.
"""

import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))

from edge import flags  # noqa: E402
from edge.bundle_schema import READABLE_VERSIONS, SCHEMA_VERSION, field_table  # noqa: E402


def flag_table() -> str:
    """Markdown table of the flag bits of :mod:`edge.flags`."""
    consts = {v: k for k, v in vars(flags).items() if k.startswith("FLAG_") and k != "FLAG_NAMES"}
    rows = ["| bit | value | constant | name in payloads |", "| --- | --- | --- | --- |"]
    for value, name in sorted(flags.FLAG_NAMES.items()):
        rows.append(f"| {value.bit_length() - 1} | {value} | `{consts[value]}` | `{name}` |")
    return "\n".join(rows) + "\n"


def schema_line() -> str:
    return (f"Schema version {SCHEMA_VERSION} (`edge.bundle_schema.SCHEMA_VERSION`); this code "
            f"reads {', '.join(map(str, READABLE_VERSIONS))}.\n")


BLOCKS = {"schema": schema_line, "bundle-fields": field_table, "flags": flag_table}


def render(text: str) -> str:
    """``text`` with every generated block replaced by what the code gives now."""
    for name, make in BLOCKS.items():
        pat = re.compile(rf"(<!-- generated: {name} -->\n).*?(<!-- end: {name} -->)", re.S)
        if not pat.search(text):
            raise ValueError(f"docs/ARCHITECTURE.md: no block '<!-- generated: {name} -->'")
        text = pat.sub(lambda m: m.group(1) + make() + m.group(2), text)
    return text


if __name__ == "__main__":
    path = DOCS / "ARCHITECTURE.md"
    path.write_text(render(path.read_text()))
    print(f"wrote {path}")

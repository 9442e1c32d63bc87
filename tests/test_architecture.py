"""docs/ARCHITECTURE.md is current: the paths it names exist, every subpackage of edge/ and
offline/ is on it, its generated blocks (bundle fields, flag bits) equal what the code gives,
and it stays one page."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def _maker():
    spec = importlib.util.spec_from_file_location("make_architecture",
                                                  ROOT / "docs" / "make_architecture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_blocks_are_current():
    text = DOC.read_text()
    assert text == _maker().render(text), \
        "docs/ARCHITECTURE.md is stale: run python docs/make_architecture.py"
    # the table really is the schema's: every field of edge.bundle_schema.FIELDS is a row
    from edge.bundle_schema import FIELDS, KF_ARRAYS
    for f in FIELDS:
        assert f"| `{f.name}` |" in text
    for f in KF_ARRAYS:
        assert f"| `kf_{f.name}` |" in text


def test_named_paths_exist():
    text = DOC.read_text()
    paths = set(re.findall(r"\b((?:edge|offline|docs|tests)/[\w/.]*\w)", text))
    assert len(paths) > 30  # the page names the tree (a regex that matched nothing would pass)
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"
    # file names in a bullet about a package (* `edge/estimator/` – `operator.py` ...)
    bullets = re.split(r"\n(?=\* |\d+\. )", text)
    checked = 0
    for b in bullets:
        m = re.match(r"(?:\* |\d+\. )[^`]*`((?:edge|offline)/\w+/)`", b)
        if not m:
            continue
        for name in re.findall(r"`(\w+\.py)`", b):
            checked += 1
            assert (ROOT / m.group(1) / name).exists(), \
                f"docs/ARCHITECTURE.md: {name} is not in {m.group(1)}"
    assert checked > 20


def test_every_subpackage_is_mentioned():
    text = DOC.read_text()
    subs = sorted(f"{p.parent.relative_to(ROOT).as_posix()}/"
                  for top in ("edge", "offline") for p in (ROOT / top).glob("*/__init__.py"))
    assert len(subs) >= 10
    missing = [s for s in subs if f"`{s}" not in text]
    assert not missing, f"docs/ARCHITECTURE.md does not mention {missing}"


def test_one_page():
    # a newcomer holds it against the tree: about a printed page or two, not a manual
    assert len(DOC.read_text().splitlines()) <= 200

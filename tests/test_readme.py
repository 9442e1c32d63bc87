"""README.md and docs/: short README, links that resolve, generated pages current, no machine
paths or internal names, the licence."""

from __future__ import annotations

import importlib.util
import re
import struct
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# what a newcomer must never read: one machine's paths, internal names of papers and issues
FORBIDDEN = re.compile(r"/work/|/home/\w|/root/|paper 0\d\d|\(0\d\d[,)]|\b\d{3}_[0-9a-f]{16}\b|"
                       r"\bissues?\b|\bgoals?\b", re.IGNORECASE)
# every page of docs/ is written for a user
CLEAN_PAGES = sorted(p.name for p in DOCS.glob("*.md"))
# what a user page must not read like: a change log (what an earlier version did, what changed
# since). docs/benchmarks.md is exempt: a dated log of measurements, compared with earlier ones
HISTORY = re.compile(r"earlier versions?|previous versions?|older versions?|no longer|"
                     r"previously|since version|(?:was|were|has been) (?:changed|fixed|replaced)|"
                     r"(?:this|last|previous) session|until now|before the (?:fix|rework|change)|"
                     r"\bused to\b|\b(?:is|are) now\b|\bnow (?:uses|prints|builds|runs|reads|takes|"
                     r"gives|checks)\b|\bformerly\b|\(was \d", re.IGNORECASE)
HISTORY_PAGES = [p for p in CLEAN_PAGES if p != "benchmarks.md"]


def _make_readme():
    spec = importlib.util.spec_from_file_location("make_readme", DOCS / "make_readme.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    out, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def broken_links(page: Path) -> list[str]:
    bad = []
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # not inside code blocks
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{page.name}: {target} (no such file)")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{page.name}: {target} (no heading #{frag})")
    return bad


def test_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n <= 250, f"README.md has {n} lines (at most 250: move detail to docs/)"


def test_readme_and_docs_links_resolve():
    pages = [README, *sorted(DOCS.glob("*.md"))]
    bad = [b for p in pages for b in broken_links(p)]
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_link_checker_finds_a_broken_link(tmp_path):
    # the checker itself: a missing file and a missing heading are both reported
    (tmp_path / "a.md").write_text("# Title\n[x](b.md) [y](a.md#nope) [z](a.md#title)\n")
    assert broken_links(tmp_path / "a.md") == ["a.md: b.md (no such file)",
                                               "a.md: a.md#nope (no heading #nope)"]


def test_forbidden_pattern_catches_internal_names_and_spares_user_text():
    bad = ["see paper 004, Sect. 2", "the rig (004, Sect. 5)", "000_f1fa64323cc723f9.txt",
           "before issue 15", "the goal (< 3 %)", "/work/venv/bin/python", "/home/dev/x"]
    good = ["Oh et al., Sect. 2, eq. 4", "the target (< 3 %)", "python benchmarks/daemon.py",
            "1,000 samples/s (0.004 s)", "GMR+ (eq. 4)"]
    assert [s for s in bad if not FORBIDDEN.search(s)] == []
    assert [s for s in good if FORBIDDEN.search(s)] == []


def test_history_pattern_catches_change_log_wording_and_spares_user_text():
    bad = ["Earlier versions replaced the damping", "the monitor no longer times out",
           "it was previously 3 s", "the default is now order 16", "the demo now prints it",
           "measured in the previous session", "a nested JSON used to crash it",
           "exposure 1.6 (was 3.6)", "until now the cost was", "the format was changed"]
    good = ["a slow sampler that cross-checks it", "the session takeover of a device",
            "the newest sample", "the known limitations", "clean_session is set",
            "0.92 -> 0.82 with the error", "what is used for the test", "now and then"]
    assert [s for s in bad if not HISTORY.search(s)] == []
    assert [s for s in good if HISTORY.search(s)] == []


@pytest.mark.parametrize("name", ["README.md", *HISTORY_PAGES])
def test_user_pages_say_what_is_not_what_changed(name):
    """User pages describe the software as it is; how it got there belongs in the commit log."""
    page = README if name == "README.md" else DOCS / name
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), page.read_text(),
                  flags=re.S)  # code blocks are not prose
    hits = [f"{name}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
            if HISTORY.search(line)]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("name", ["README.md", *CLEAN_PAGES])
def test_no_machine_paths_or_internal_names(name):
    page = README if name == "README.md" else DOCS / name
    hits = [f"{name}:{i}: {line.strip()}" for i, line in enumerate(page.read_text().splitlines(),
                                                                   1)
            if FORBIDDEN.search(line)]
    assert not hits, "\n".join(hits)


def test_readme_has_the_two_commands_and_ci_runs_the_test_command():
    text = README.read_text()
    assert "bash examples/demo.sh" in text and "bash tests/run.sh" in text
    assert "bash tests/run.sh" in (ROOT / ".ci" / "run").read_text()


def test_generated_reference_pages_are_current():
    pytest.importorskip("scipy")  # the offline commands' help (not in the edge tier)
    mod = _make_readme()
    for name, render in mod.PAGES.items():
        assert (DOCS / name).read_text() == render(), \
            f"docs/{name} is stale: run python docs/make_readme.py"


def test_readme_picture_is_a_real_png():
    raw = (DOCS / "img" / "demo.png").read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", raw[16:24])  # IHDR width and height
    assert w >= 800 and h >= 400, (w, h)  # the demo's identification figure is 1100 x 682


def test_licence_is_mit_everywhere():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text()
    assert "MIT" in README.read_text().split("## Licence", 1)[1]

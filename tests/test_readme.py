"""README.md is generated from docs/*.md and must be current."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_generated_from_docs():
    spec = importlib.util.spec_from_file_location("make_readme", ROOT / "docs" / "make_readme.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (ROOT / "README.md").read_text() == mod.render(), \
        "README.md is stale: run python docs/make_readme.py"


def test_readme_has_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert "bash examples/demo.sh" in text and "bash tests/run.sh" in text
    assert "bash tests/run.sh" in (ROOT / ".ci" / "run").read_text()

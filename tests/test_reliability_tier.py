"""The quick reliability check (tests/reliability_tests.txt, marker ``reliability``) covers
the six items of the field-hardening issue, and every line names a test that exists."""

import ast
from pathlib import Path

from conftest import reliability_tests

ROOT = Path(__file__).resolve().parents[1]


def test_every_item_has_a_test_and_every_test_exists():
    listed = reliability_tests()
    # the six items of the field-hardening issue, and the later rounds' items (fuzz classes
    # of the surfaces they added: records 10, placement 7, bundle fields 9, hybrid 3)
    assert {1, 2, 3, 4, 5, 6} <= set(listed.values()) <= set(range(1, 11))
    for nodeid in listed:
        path, name = nodeid.split("::")
        tree = ast.parse((ROOT / path).read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in names, f"{nodeid}: no such test"

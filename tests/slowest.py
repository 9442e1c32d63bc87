"""Measure every test's duration and write tests/slow_tests.txt (the tests the fast tier skips).

    .venv-test/bin/python tests/slowest.py [--threshold 1.0] [pytest args, e.g. tests/test_x.py]

Runs pytest (tests not already marked slow by their own code) with a plugin that adds up each
test's setup, call and teardown time; a test still running after ``--cap`` seconds is stopped
(pytest-timeout; it fails, and counts as slow), so the measurement takes minutes, not the
suite's full time. A test over ``--threshold`` seconds is listed; a test
whose *setup* alone is over it (a module fixture: a build, a broker, a browser) lists its whole
module, since deselecting only the first test would move the cost to the next. Tests listed
before are kept (they did not run: marked slow) unless ``--reset``. tests/conftest.py marks the listed tests
``slow``; ``bash tests/run.sh --fast`` runs ``-m "not slow"``. Rerun after adding slow tests,
on a machine as idle as you can get: the durations are wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
LIST = HERE / "slow_tests.txt"


class Durations:
    def __init__(self):
        self.total: dict[str, float] = defaultdict(float)
        self.setup: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report):
        self.total[report.nodeid] += report.duration
        if report.when == "setup":
            self.setup[report.nodeid] += report.duration


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threshold", type=float, default=1.0,
                   help="seconds (setup + call + teardown) above which a test is slow "
                        "(default: %(default)s)")
    p.add_argument("--cap", type=float, default=3.0,
                   help="stop a test after this many seconds (pytest-timeout): it is slow "
                        "anyway, and the measurement stays short (default: %(default)s)")
    p.add_argument("--reset", action="store_true",
                   help="forget the tests listed before (measure them again)")
    a, rest = p.parse_known_args(argv)
    os.chdir(HERE.parent)  # node ids relative to the repository, as `python -m pytest` gives
    sys.path.insert(0, str(HERE.parent))  # `import tests.helpers`, as `python -m pytest` allows
    d = Durations()
    if a.reset and LIST.is_file():
        LIST.unlink()  # before collection: conftest marks what the list names
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-m", "not slow", "--timeout",
                        str(a.cap), "--timeout-method", "signal", *rest], plugins=[d])
    if not d.total:
        print("slowest.py: no test ran", file=sys.stderr)
        return 2
    old = {}
    if LIST.is_file():
        for line in LIST.read_text().splitlines():
            node = line.split("#")[0].strip()
            if node:
                old[node] = line
    new = {}
    for node, t in d.total.items():
        base = node.split("[")[0]
        if d.setup[node] > a.threshold:  # a module fixture: the whole module is slow
            new[node.split("::")[0]] = f"{node.split('::')[0]}  # setup {d.setup[node]:.1f} s"
        elif t > a.threshold:
            new[base] = f"{base}  # {t:.1f} s"
    # the listed tests did not run (marked slow): keep them; --reset starts from scratch
    kept = {} if a.reset else {k: v for k, v in old.items() if k not in new}
    lines = sorted({**kept, **new}.values())
    LIST.write_text("# tests the fast tier skips (tests/slowest.py; wall time when measured)\n"
                    + "\n".join(lines) + "\n")
    fast = sum(t for n, t in d.total.items()
               if n.split("[")[0] not in new and n.split("::")[0] not in new)
    print(f"slowest.py: {len(new)} slow entries from this run, {len(kept)} kept; the rest "
          f"took {fast:.1f} s in all (pytest exit {code}); wrote {LIST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The fuzz tier's seeded mutator (tests/test_fuzz_*.py).

Each class runs ``VSENSE_FUZZ_EXAMPLES`` cases (default 2,000: the CI setting; nightly e.g.
50,000). Case ``i`` of class ``name`` is generated from ``random.Random(f"{seed}:{name}:{i}")``
with ``seed = VSENSE_FUZZ_SEED`` (default 0), so a failure message names everything needed to
replay exactly that case: ``VSENSE_FUZZ_SEED=s VSENSE_FUZZ_CASE=i pytest -k name``.

A plain seeded generator instead of hypothesis: hypothesis' engine spent ~3/4 of the time
generating and mutating (measured with cProfile: 12.6 of 17.5 s for 600 cases), which kept
2,000 cases per class out of a one-minute CI budget.
"""

from __future__ import annotations

import json
import os
import random
import time

N_EXAMPLES = int(os.environ.get("VSENSE_FUZZ_EXAMPLES", "2000"))
SEED = os.environ.get("VSENSE_FUZZ_SEED", "0")
ONLY_CASE = os.environ.get("VSENSE_FUZZ_CASE")

#: values that break naive code: types, huge/tiny/non-finite numbers, nesting, encodings
TOML_TOKENS = ["0", "-1", "1", "2", "1e-300", "1e300", "nan", "inf", "-inf", "100000000",
               "18446744073709551617", '"x"', '""', '"\\u0000"', "true", "[]", "[[]]", "{}",
               "[1, 2]", '["a", 1]', "{ a = 1 }", "1979-05-27", "0x7f", "'''a'''",
               "[" * 50 + "]" * 50]

#: numeric extremes for every numeric field (config keys, bundle arrays): zero and signs,
#: the float range's ends (1e308 overflows as soon as it is multiplied), subnormals, 64-bit
#: integer edges and the non-finite values
EXTREMES = [0, -0.0, -1, 1, 0.5, 1e-308, 5e-324, 1e300, 1e308, -1e308, 2**31, 2**53 + 1,
            2**63 - 1, 2**63, -(2**63), 2**64, float("nan"), float("inf"), -float("inf")]

#: empty and absurd strings for every string field: empty, blank, control characters, very
#: long, paths that are not what the key wants, MQTT wildcards, shell and format syntax
ABSURD = ["", " ", "\x00", "a\x00b", "\n", "a\tb", "\u00e9\u20ac\U0001f600", "x" * 5000,
          "../../../../etc/passwd", "/dev/null", "/proc/self/mem", "/", ".", "#", "+", "a/#",
          "*", "-1", "nan", "1e308", "\\", "'", '"', "{}", "[]", "~", "$HOME", "%s%n",
          "localhost:1883", "::1", "[::1]", "a" * 254]


class Draw(random.Random):
    """``random.Random`` plus the value families the mutators need."""

    def int(self, a: int, b: int) -> int:  # noqa: A003 - reads like hypothesis' integers
        return self.randint(a, b)

    def bool(self) -> bool:  # noqa: A003
        return self.random() < 0.5

    def text(self, max_size: int = 20) -> str:
        alphabet = "ab\u00e9\u20ac\x00\n\t\"'\\[]{}=,.#-_ 0123456789\ud7ff"
        return "".join(self.choice(alphabet) for _ in range(self.randint(0, max_size)))

    def binary(self, min_size: int = 0, max_size: int = 16) -> bytes:
        return bytes(self.getrandbits(8) for _ in range(self.randint(min_size, max_size)))

    def number(self):
        return self.choice([0, -1, 1, 2, 10**6, -(2**70), 2**70, 1e-300, 1e300,
                            float("nan"), float("inf"), -float("inf"), 0.5, -0.0,
                            self.uniform(-1e3, 1e3), self.randint(-10**9, 10**9)])

    def extreme(self):
        """A numeric extreme (:data:`EXTREMES`)."""
        return self.choice(EXTREMES)

    def near(self, lo, hi):
        """A limit ``lo``/``hi`` itself or just past it (either may be None)."""
        opts = []
        if lo is not None:
            opts += [lo, lo - max(abs(lo), 1.0) * 1e-9]
        if hi is not None:
            opts += [hi, hi + max(abs(hi), 1.0) * 1e-9]
        return self.choice(opts or EXTREMES)

    def absurd(self) -> str:
        """An empty or absurd string (:data:`ABSURD`), or random text."""
        return self.choice(ABSURD) if self.int(0, 4) else self.text(30)

    def json(self, depth: int = 0):
        """A JSON-compatible value (NaN/inf included, as Python's json emits them)."""
        k = self.randint(0, 7 if depth < 3 else 4)
        if k == 0:
            return None
        if k == 1:
            return self.bool()
        if k in (2, 3):
            return self.number()
        if k == 4:
            return self.text()
        if k == 5:
            return [self.json(depth + 1) for _ in range(self.randint(0, 4))]
        return {self.text(8): self.json(depth + 1) for _ in range(self.randint(0, 4))}

    def mutated_text(self, text: str, tokens=TOML_TOKENS) -> str:
        """1..4 line-level mutations: a value replaced by a token, a line deleted,
        duplicated, garbage inserted, or the file truncated."""
        lines = text.splitlines()
        for _ in range(self.randint(1, 4)):
            if not lines:
                break
            i = self.randint(0, len(lines) - 1)
            op = self.choice(["value", "value", "value", "delete", "dup", "garbage",
                              "truncate"])
            if op == "value" and "=" in lines[i]:
                lines[i] = f"{lines[i].split('=', 1)[0]}= {self.choice(tokens)}"
            elif op == "delete":
                del lines[i]
            elif op == "dup":
                lines.insert(i, lines[i])
            elif op == "garbage":
                lines.insert(i, self.text(30))
            elif op == "truncate":
                lines = lines[:i] + [lines[i][:self.randint(0, len(lines[i]))]]
        return "\n".join(lines) + "\n"

    def mutated_bytes(self, data: bytes) -> bytes:
        """1..8 byte-level mutations: flip, overwrite, delete, insert, truncate."""
        b = bytearray(data)
        for _ in range(self.randint(1, 8)):
            if not b:
                break
            i = self.randint(0, len(b) - 1)
            op = self.choice(["flip", "set", "delete", "insert", "truncate"])
            if op == "flip":
                b[i] ^= 1 << self.randint(0, 7)
            elif op == "set":
                b[i] = self.choice([0, 255, 0x7F, 0x80])
            elif op == "delete":
                del b[i:i + self.randint(1, 16)]
            elif op == "insert":
                b[i:i] = self.binary(1, 16)
            else:
                del b[i:]
        return bytes(b)


def run_cases(name: str, case, n: int | None = None, limit_s: float | None = None) -> dict:
    """Run ``case(draw) -> outcome label`` for every case of class ``name`` (``n`` cases,
    default ``N_EXAMPLES``); a failure (any exception escaping ``case``, or a case slower than
    ``limit_s``: a hang) is re-raised naming seed and case. Returns the count of each outcome
    label (tests assert the mix is not degenerate)."""
    counts: dict = {}
    cases = [int(ONLY_CASE)] if ONLY_CASE is not None else range(n or N_EXAMPLES)
    slowest = (0.0, -1)
    for i in cases:
        d = Draw(f"{SEED}:{name}:{i}")
        t0 = time.perf_counter()
        try:
            label = case(d)
        except BaseException as e:
            raise AssertionError(f"fuzz {name}: case {i} failed (replay: VSENSE_FUZZ_SEED="
                                 f"{SEED} VSENSE_FUZZ_CASE={i}): {type(e).__name__}: "
                                 f"{str(e)[:300]}") from e
        dt = time.perf_counter() - t0
        if limit_s is not None and dt > limit_s:
            raise AssertionError(f"fuzz {name}: case {i} took {dt:.1f} s, more than {limit_s:g} s "
                                 f"(replay: VSENSE_FUZZ_SEED={SEED} VSENSE_FUZZ_CASE={i})")
        if dt > slowest[0]:
            slowest = (dt, i)
        counts[label] = counts.get(label, 0) + 1
    # hangs are caught by pytest-timeout; the slowest case is shown for the record
    print(f"fuzz {name}: {sum(counts.values())} cases {counts}; slowest case {slowest[1]} "
          f"{slowest[0] * 1e3:.0f} ms")
    return counts


def dumps(v) -> str:
    return json.dumps(v)


def tier_cases(request, sample: int = 40, full: int | None = None) -> int:
    """Cases per class for this run: ``full`` (default ``N_EXAMPLES``, 2,000) in the
    reliability tier (``-m reliability``, ``tests/run.sh --reliability``), a fast sample of
    ``sample`` cases in the normal tier."""
    expr = (request.config.getoption("markexpr", "") or "")
    reliability = "reliability" in expr and "not reliability" not in expr
    return (N_EXAMPLES if full is None else full) if reliability else sample

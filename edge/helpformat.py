"""The ``--help`` layout shared by ``vsense-edge`` and ``vsense-offline``."""

from __future__ import annotations

import argparse
import re

_ROLE = re.compile(r":(?:meth|class|func|attr|mod|data):`~?([^`]+)`")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's and epilog's line breaks, without reStructuredText markup
    (double back-quotes, roles: docstrings are reused as help); appends ``(default: X)`` to
    every option whose default says something (not None, False, or a suppressed value)."""

    def _fill_text(self, text, width, indent):
        return super()._fill_text(_ROLE.sub(r"\1", text).replace("``", ""), width, indent)

    def _expand_help(self, action):
        return _ROLE.sub(r"\1", super()._expand_help(action)).replace("``", "")

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if ("%(default)" in text or d is None or d is False or d is argparse.SUPPRESS
                or action.option_strings == [] and action.nargs in (argparse.REMAINDER,)):
            return text
        if isinstance(d, (list, tuple)):
            shown = " ".join(str(x) for x in d)
        else:
            shown = str(d)
        return f"{text} (default: {shown})"

"""Assertions on a CLI run shared by the test modules (``run_cli`` results: exit code, stdout, stderr)."""

from __future__ import annotations

from typing import Any


def assert_one_line_exit_2(res: Any, *needles: str) -> None:
    """A user error: exit status 2, one non-blank line on stderr, no traceback, naming every ``needle``."""
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.exit_code == 2, res.stdout + res.stderr
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]

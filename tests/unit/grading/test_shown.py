"""Names a learner chose, shown to an instructor (course_tools/grading/shown.py)."""

from __future__ import annotations

import os

import pytest

from course_tools.grading.shown import shown


@pytest.mark.parametrize("raw, expected", [
    ("alice+02_devices+2026-12-04 11:00:00.000000 UTC", "alice+02_devices+2026-12-04 11:00:00.000000 UTC"),
    ("한국어 이름", "한국어 이름"),
    ("bad\x1b[2Kline\r\nforged", "bad\\x1b[2Kline\\x0d\\x0aforged"),
    ("rtl\u202eexe.txt", "rtl\\u202eexe.txt"),
    (os.fsdecode(b"byte\xff"), "byte\\xff"),
    ("back\\x1bslash", "back\\\\x1bslash"),
    ("del\x7f and c1\x85", "del\\x7f and c1\\x85"),
])
def test_what_cannot_be_printed_is_escaped_and_the_rest_kept(raw, expected):
    assert shown(raw) == expected
    assert shown(raw).isprintable() and shown(raw).encode("utf-8")

"""A name a learner chose, made safe to show to an instructor: on a terminal, in a table, in a CSV.

A folder in the exchange is named by whoever made it. Measured on a shared machine (issue 45): a byte that is
not UTF-8 in a folder name made ``course_tools export`` fail for the whole class (Python hands such a byte on
as a lone surrogate, which no UTF-8 writer accepts), and control bytes printed raw to the instructor's
terminal forged a line that hid a refusal. :func:`shown` is the one place such a name is turned into text:
every character that is not printable (C0/C1 controls, DEL, format characters such as the bidirectional
overrides, lone surrogates, unassigned code points) becomes a visible escape, and a backslash is doubled so
an escape the learner typed cannot pass for one made here. Printable text, Hangul included, is left alone.
"""

from __future__ import annotations

import unicodedata

__all__ = ["shown"]

#: Unicode categories shown escaped: controls, format characters, surrogates, private use, unassigned
_ESCAPED = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def shown(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\x1b``, ``\\u202e``, ``\\xff`` for a raw byte)."""
    out = []
    for ch in str(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (os.fsdecode's surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif unicodedata.category(ch) in _ESCAPED:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)

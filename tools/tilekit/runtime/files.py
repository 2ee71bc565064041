"""How every file the kit parses is read: one function, normalizing at the edge (CRLF, lone CR, a
BOM, a missing final newline), so no parser sees them. In the runtime because autotune reads its
cache through it; tilekit.reports.records re-exports both."""

from __future__ import annotations


def normalize_text(text: str) -> str:
    """Text as every parser of the kit expects it: LF line ends, no BOM, a final newline.

    Logs rewritten by other tools come with CRLF (Windows) or lone CR (old Mac) line ends, a UTF-8
    byte order mark, or no final newline; each parses, compares and validates as its plain LF form.
    Line numbers are kept: CRLF and lone CR are one line break each.
    """
    text = text.removeprefix("\ufeff")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if not text or text.endswith("\n") else text + "\n"


def read_text(path) -> str:
    """Every file the kit parses is read here: raw and sanitized logs, JUnit XML, reports, JSON.

    Normalized at this edge (``normalize_text``), so no parser sees a CR or a BOM; what the kit
    writes is LF (``write_atomic``).
    """
    # errors="replace": a killed run can leave a cut multi-byte character; that must not stop us.
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return normalize_text(f.read())

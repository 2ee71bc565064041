"""Performance record blocks (DESIGN.md, record format v1): print, parse, sanitize.

Parsing is pure functions over text; the only I/O is ``read_text``, ``write_atomic`` and ``main``
(the ``python -m tilekit sanitize`` command). A raw pytest log goes in; out come the valid records,
every rejected block with its reason, and every failed, errored or skipped case, so that nothing
is dropped silently.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field

from tilekit.runtime import providers
from tilekit.runtime.files import normalize_text, read_text  # noqa: F401 (re-exported: the reports read through records)

BEGIN = "==== Performance Test Results ===="
END = "==== End Performance Test Results ===="
PROPERTY = "tilekit_perf_record"  # user_properties name a timed test attaches its record under
PORT_BACKEND = "cutile-rs"
# torch_flash: a second torch baseline where PyTorch has two fused implementations of the op
# (attention: SDPA on cuDNN is `torch`, on FlashAttention-2 `torch_flash`; docs/kernels.md);
# torch_compile: the eager formula under torch.compile, where the eager op is a composition of
# several kernels (fused_add_rms_norm: the add, then rms_norm)
BASELINE_BACKENDS = (
    "cutile",
    "triton",
    "torch",
    "torch_flash",
    "torch_compile",
    *providers.NAMES,
)  # the Makefile's KNOWN_BASELINES

TIME_KEYS = ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms")
REQUIRED_KEYS = ("test", "kernel", "backend", "config", "timer") + TIME_KEYS + ("nrep",)
_KEY_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): ?(.*)$")
_MARKER = re.compile(r"^(==== (?:End )?Performance Test Results ====)[ \t]*$", re.M)


# ---------------------------------------------------------------------------------------------
# Printing (used by the pytest plugin and by bench code)


def _json_value(value):
    """A JSON-able copy of a config value; dtypes become their short name (float16, bfloat16)."""
    # Subclasses become their plain base type: execnet (pytest-xdist) refuses e.g. torch's
    # TorchVersion, a str subclass (seen on a two-GPU H200 run).
    if value is None:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    text = str(value)
    if "dtype" in type(value).__name__.lower() or text.startswith("torch."):
        return text.removeprefix("torch.")  # torch.float16 -> float16; numpy dtypes print bare
    if hasattr(value, "item"):  # numpy scalar
        return _json_value(value.item())
    raise TypeError(
        f"config value {value!r} ({type(value).__name__}) has no JSON form; use str, int, float, bool or a dtype"
    )


def plain_record(record: dict) -> dict:
    """A copy of a record made of JSON types only (dtypes by short name), so it can cross a process
    boundary: pytest-xdist sends each report to the controller with execnet, which refuses others."""
    return _json_value(record)


def canonical_config(config: dict) -> str:
    """The canonical JSON of a config: keys sorted, `", "`/`": "` separators, dtype short names."""
    return json.dumps(_json_value(config), sort_keys=True, separators=(", ", ": "))


def _format_ms(value: float) -> str:
    # 6 decimals (1 ns) as in DESIGN's example; sub-ns times keep their digits instead of 0.000000.
    return f"{value:.6f}" if abs(value) >= 1e-3 else f"{value:.6e}"


def _format_value(key: str, value) -> str:
    if key == "config":
        return canonical_config(value)
    if key in TIME_KEYS:
        return _format_ms(float(value))
    if isinstance(value, (dict, list, tuple, bool)) or value is None:
        return json.dumps(_json_value(value), sort_keys=True, separators=(", ", ": "))
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    return json.dumps(text) if "\n" in text or "\r" in text else text


def format_block(record: dict) -> str:
    """One record block (no trailing newline): required keys in DESIGN order, then the extras."""
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise KeyError(f"perf record for {record.get('test', '?')} lacks {', '.join(missing)}")
    keys = list(REQUIRED_KEYS) + [k for k in record if k not in REQUIRED_KEYS]
    lines = [BEGIN] + [f"{k}: {_format_value(k, record[k])}" for k in keys] + [END]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Parsing


@dataclass(frozen=True)
class Record:
    """One valid block. ``fields`` holds every `key: value` as text (extras included)."""

    test: str
    kernel: str
    backend: str
    config: dict
    config_key: str  # canonical JSON; port and baselines are matched on this
    timer: str
    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    nrep: int
    fields: dict
    line: int  # 1-based line of the BEGIN marker in the parsed text
    text: str  # the block as it will be written to a sanitized log

    def number(self, key: str) -> float | None:
        """An optional numeric extra (gbps, peak_gbps, tflops, ...) or None if absent/invalid."""
        try:
            value = float(self.fields[key])
        except (KeyError, ValueError):
            return None
        return value if math.isfinite(value) else None

    def env(self) -> dict:
        """The `env` extra as a dict ({} when absent or not a JSON object)."""
        try:
            value = json.loads(self.fields.get("env", "{}"))
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Rejected:
    line: int
    test: str
    reason: str


@dataclass(frozen=True)
class Outcome:
    """A non-passing case seen in pytest's output: FAILED, ERROR or SKIPPED."""

    status: str
    case: str  # node id, or path for a collection error / skip location
    reason: str
    line: int
    count: int = 1  # SKIPPED [N] lines group N cases


@dataclass
class ParsedLog:
    records: list = field(default_factory=list)
    rejected: list = field(default_factory=list)
    outcomes: list = field(default_factory=list)
    passed: int | None = None  # from pytest's final summary line, when present
    summary: str | None = None  # that line, e.g. "3 passed, 1 failed in 2.10s"


@functools.lru_cache(maxsize=1 << 16)
def _config_key(raw: str) -> str:
    # Port and baseline logs repeat the same config texts; canonicalize each text once.
    return json.dumps(json.loads(raw), sort_keys=True, separators=(", ", ": "))


def _check_block(fields: dict, kernel: str | None, backend: str | None) -> tuple[str | None, dict]:
    """(reason the block is invalid or None, typed values)."""
    missing = [k for k in REQUIRED_KEYS if k not in fields]
    if missing:
        return f"missing required keys: {', '.join(missing)}", {}
    typed = {}
    for key in TIME_KEYS:
        try:
            value = float(fields[key])
        except ValueError:
            return f"{key} is {fields[key]!r}, not a number", {}
        least_ok = value >= 0 if key == "std_ms" else value > 0
        if not math.isfinite(value) or not least_ok:
            bound = ">= 0" if key == "std_ms" else "> 0"
            return f"{key} is {fields[key]} (must be finite and {bound})", {}
        typed[key] = value
    if not (
        typed["min_ms"] <= typed["median_ms"] <= typed["max_ms"]
        and typed["min_ms"] <= typed["mean_ms"] <= typed["max_ms"]
    ):
        return "times are inconsistent (need min_ms <= median_ms, mean_ms <= max_ms)", {}
    try:
        typed["nrep"] = int(fields["nrep"])
    except ValueError:
        return f"nrep is {fields['nrep']!r}, not an integer", {}
    if typed["nrep"] < 1:
        return f"nrep is {typed['nrep']} (must be >= 1)", {}
    try:
        typed["config"] = json.loads(fields["config"])
    except json.JSONDecodeError as exc:
        return f"config is not JSON ({exc.msg})", {}
    if not isinstance(typed["config"], dict):
        return "config is not a JSON object", {}
    typed["config_key"] = _config_key(fields["config"])
    for key in ("test", "kernel", "backend", "timer"):
        if not fields[key]:
            return f"{key} is empty", {}
    if kernel is not None and fields["kernel"] != kernel:
        return f"kernel is {fields['kernel']!r}, this log is for {kernel!r}", {}
    if backend is not None and fields["backend"] != backend:
        return f"backend is {fields['backend']!r}, this log is for {backend!r}", {}
    return None, typed


_KEYS_SEEN_VALID: set = set()


def _valid_keys(fields: dict) -> bool:
    """Every key is an ASCII identifier; keys already proven valid are remembered (few distinct)."""
    for key in fields.keys() - _KEYS_SEEN_VALID:
        if not (key.isidentifier() and key.isascii()):
            return False
        if len(_KEYS_SEEN_VALID) < 4096:
            _KEYS_SEEN_VALID.add(key)
    return True


def _bad_line(lines: list[str], start: int) -> Rejected:
    """The rejection naming the first line of a block that is not a new `key: value` line."""
    seen: dict[str, str] = {}
    for offset, line in enumerate(lines, start=1):
        match = _KEY_LINE.match(line.rstrip())
        if not match:
            return Rejected(
                start, seen.get("test", "?"), f"line {start + offset}: not a `key: value` line: {line[:80]!r}"
            )
        if match.group(1) in seen:
            return Rejected(
                start, seen.get("test", "?"), f"line {start + offset}: key {match.group(1)!r} appears twice"
            )
        seen[match.group(1)] = match.group(2).strip()
    return Rejected(start, seen.get("test", "?"), "unreadable block")  # not reached: a line was bad


def _parse_block(body: str, start: int, kernel: str | None, backend: str | None) -> Record | Rejected:
    """``body`` is the text between the markers; ``start`` is the BEGIN line (1-based)."""
    # str.partition over the lines beats a regex here; this runs for every block of a log.
    parts = [line.partition(":") for line in body.split("\n")] if body else []
    fields = {key: value.strip() for key, sep, value in parts if sep}
    if len(fields) != len(parts) or not _valid_keys(fields):  # a line without ":", or a key twice
        return _bad_line(body.split("\n"), start)
    reason, typed = _check_block(fields, kernel, backend)
    if reason:
        return Rejected(start, fields.get("test", "?"), reason)
    text = "\n".join([BEGIN] + [f"{k}: {v}" for k, v in fields.items()] + [END])
    return Record(
        test=fields["test"],
        kernel=fields["kernel"],
        backend=fields["backend"],
        timer=fields["timer"],
        **typed,  # config, config_key, the times and nrep, as _check_block typed them
        fields=dict(fields),
        line=start,
        text=text,
    )


# pytest's short summary (-r) lines and -v progress lines
_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?\[[^\]]*\]|\S+)(?: - (.*))?$")
_SKIP = re.compile(r"^SKIPPED \[(\d+)\] (\S+?): (.*)$")
_PROGRESS = re.compile(r"^(?P<case>\S+::\S+?(?:\[[^\]]*\])?) (?P<status>FAILED|ERROR)\b")
# the same under pytest-xdist (-n N): "[gw1] [ 50%] FAILED tests/x.py::test_perf[a-1]"
_PROGRESS_XDIST = re.compile(r"^\[gw\d+\] \[ *\d+%\] (?P<status>FAILED|ERROR) (?P<case>\S+::\S+?(?:\[[^\]]*\])?)$")
_FINAL = re.compile(r"^=+ (.*\b(?:passed|failed|error|errors|skipped|no tests ran)\b.*) in [\d.]+s\b.*=+$")


_CANDIDATE = re.compile(r"^(?:FAILED|ERROR|SKIPPED|=|\S+::|\[gw\d+\] ).*$", re.M)  # lines worth matching


def _candidate_lines(chunks: list[tuple[int, str]]):
    """(line number, line) of the lines of text chunks that may be pytest outcome lines."""
    for first, chunk in chunks:
        number, at = first, 0
        for match in _CANDIDATE.finditer(chunk):
            number += chunk.count("\n", at, match.start())
            at = match.start()
            yield number, match.group(0).rstrip()


def _scan_outcomes(chunks: list[tuple[int, str]]) -> tuple[list[Outcome], int | None, str | None]:
    """Outcomes of the text outside blocks, given as (number of its first line, text) chunks."""
    summary_cases: dict[tuple[str, str], Outcome] = {}
    progress_cases: dict[tuple[str, str], Outcome] = {}
    skips: list[Outcome] = []
    passed, final = None, None
    for number, line in _candidate_lines(chunks):
        if match := _SUMMARY.match(line):
            status, case, reason = match.groups()
            summary_cases.setdefault((status, case), Outcome(status, case, reason or "(no message)", number))
        elif match := _SKIP.match(line):
            skips.append(Outcome("SKIPPED", match.group(2), match.group(3), number, int(match.group(1))))
        elif (" FAILED" in line or " ERROR" in line) and (
            (match := _PROGRESS.match(line)) or (match := _PROGRESS_XDIST.match(line))
        ):
            case, status = match["case"], match["status"]
            progress_cases.setdefault(
                (status, case), Outcome(status, case, "no short-summary line; see the traceback in the raw log", number)
            )
        elif match := _FINAL.match(line):
            final = match.group(1)
            found = re.search(r"(\d+) passed", final)
            passed = int(found.group(1)) if found else 0
    # A summary line carries the reason; a -v progress line only tells that the case failed.
    cases = dict(progress_cases)
    cases.update(summary_cases)
    ordered = sorted(cases.values(), key=lambda o: (o.line, o.status, o.case))
    return ordered + skips, passed, final


def parse_log(text: str, kernel: str | None = None, backend: str | None = None) -> ParsedLog:
    """Every valid block, every rejected block and every non-passing case of a raw pytest log.

    With ``kernel`` / ``backend`` given, a block for another kernel or backend is rejected.
    The text is walked marker to marker (regex over the whole text), not line by line: a
    10,000-record log is 150,000 lines.
    """
    text = normalize_text(text)
    result = ParsedLog()
    outside: list[tuple[int, str]] = []  # text outside blocks, where pytest's outcome lines are
    pos, line_no = 0, 1  # start of the text not yet assigned, and its line number
    block = None  # (line of its BEGIN, offset where its body starts)
    for marker in _MARKER.finditer(text):
        at = line_no + text.count("\n", pos, marker.start())
        if marker.group(1) == BEGIN:
            if block is not None:
                body = text[block[1] : marker.start() - 1]
                result.rejected.append(_truncated(block[0], body, "a new block began before its end marker"))
            else:
                outside.append((line_no, text[pos : marker.start()]))
            block = (at, marker.end() + 1)
        elif block is not None:
            body = text[block[1] : marker.start() - 1] if marker.start() > block[1] else ""
            item = _parse_block(body, block[0], kernel, backend)
            (result.records if isinstance(item, Record) else result.rejected).append(item)
            block = None
        else:
            continue  # a stray end marker is noise; leave it in the outside text
        pos, line_no = marker.end(), at
    if block is not None:
        body = text[block[1] :]
        result.rejected.append(_truncated(block[0], body, "the log ends inside the block (run killed?)"))
        outside.append((block[0] + 1, body))
    else:
        outside.append((line_no, text[pos:]))
    result.outcomes, result.passed, result.summary = _scan_outcomes(outside)
    return result


def _truncated(start: int, body: str, why: str) -> Rejected:
    found = re.search(r"^test:[ \t]*(.*?)[ \t]*$", body, re.M)
    return Rejected(start, found.group(1) if found else "?", f"truncated: {why}")


# ---------------------------------------------------------------------------------------------
# Sanitized output


def clean_text(records: list[Record]) -> str:
    """A sanitized log: the valid blocks back to back, nothing else."""
    return "".join(r.text + "\n" for r in records)


def investigation_text(label: str, parsed: ParsedLog) -> str:
    """The investigation section for one raw log: counts, then every rejection and failure."""
    lines = [
        f"== {label}",
        f"valid blocks: {len(parsed.records)}",
        f"pytest summary: {parsed.summary or '(none: the run did not finish, or this is not pytest output)'}",
        f"rejected blocks: {len(parsed.rejected)}",
    ]
    lines += [f"  line {r.line}: {r.test}: {r.reason}" for r in parsed.rejected]
    for status, name in (("FAILED", "failed"), ("ERROR", "errored"), ("SKIPPED", "skipped")):
        found = [o for o in parsed.outcomes if o.status == status]
        lines.append(f"{name} cases: {sum(o.count for o in found)}")
        lines += [
            f"  line {o.line}: {o.case}" + (f" [{o.count}]" if o.count > 1 else "") + f": {o.reason}" for o in found
        ]
    if parsed.passed and not parsed.records:
        lines.append(
            f"note: {parsed.passed} cases passed but printed no record block: was pytest run with --print-record?"
        )
    return "\n".join(lines) + "\n"


INVESTIGATION_HEADER = (
    "# tilekit perf investigation log: for each raw log, every rejected block and every\n"
    "# failed, errored or skipped case, with the line of the raw log it comes from.\n"
)


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` so that ``path`` is either the old file or the whole new one, never half."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tilekit sanitize",
        description="Split a raw pytest log into a clean record log and an investigation log.",
    )
    parser.add_argument("raw", help="raw pytest output (e.g. reports/logs/perf_cutile_rs.full.txt)")
    parser.add_argument("--out", required=True, help="sanitized log to write (blocks only)")
    parser.add_argument("--investigation", required=True, help="investigation log to write")
    parser.add_argument("--kernel", help="reject blocks whose kernel is not this one")
    parser.add_argument("--backend", help="reject blocks whose backend is not this one")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.raw):
        print(f"tilekit sanitize: {args.raw}: no such file", file=sys.stderr)
        return 2
    parsed = parse_log(read_text(args.raw), args.kernel, args.backend)
    write_atomic(args.out, clean_text(parsed.records))
    write_atomic(args.investigation, INVESTIGATION_HEADER + investigation_text(args.raw, parsed))
    print(
        f"tilekit sanitize: {args.raw}: {len(parsed.records)} valid, {len(parsed.rejected)} rejected "
        f"-> {args.out}, {args.investigation}"
    )
    return 0


def record_blocks(report) -> list[str]:
    """The blocks to print for one test report (only a passed call phase prints)."""
    if report.when != "call" or not report.passed:
        return []
    return [format_block(value) for name, value in report.user_properties if name == PROPERTY]

"""`make new KERNEL=<name> FROM=<kernel>`: a new kernel folder written from its closest relative.

    python -m tilekit new --name gelu_and_mul --from silu_and_mul

Copies kernels/<from>/ to kernels/<name>/ and renames the kernel inside it: the device module
(`<from>_device`), the export (`cutile_<from>`), the imports (`kernels.<from>`), the entry and every
other whole-word use of the name, except another library's attribute of that name (`torch.softmax`,
`ops.softmax`: a `.` before it). NOTES.md starts over (the relative's performance story is not the
new kernel's). Writes the suite stub tests/kernels/test_<name>.py. Refuses an existing name, a name
that is not a lowercase identifier (or is a Python or Rust keyword), and an unknown <from>, with the
fix; prints the next commands. Nothing else in the repository is edited: the crate, make and
pytest find the folder by themselves (docs/kernels.md).
"""

from __future__ import annotations

import argparse
import keyword
import re
import shutil
import sys
from pathlib import Path

RUST_KEYWORDS = frozenset(
    "as break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub "
    "ref return self static struct super trait true type unsafe use where while async await dyn abstract "
    "become box do final macro override priv typeof unsized virtual yield try gen".split()
)
NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


class ScaffoldError(ValueError):
    """A `make new` that cannot be made, with the fix."""


def name_error(name: str, kernels_dir: Path) -> str | None:
    """Why `name` cannot be a new kernel's, or None.

    >>> name_error("gelu_and_mul", Path("/nonexistent"))
    >>> name_error("GeLU", Path("/nonexistent"))
    "'GeLU' is not a lowercase identifier (a letter, then letters, digits, _): it names a Python package and a Rust module"
    >>> name_error("match", Path("/nonexistent"))
    "'match' is a Rust keyword: it would name a Rust module; pick another"
    """
    if not NAME.match(name):
        return (
            f"{name!r} is not a lowercase identifier (a letter, then letters, digits, _): "
            "it names a Python package and a Rust module"
        )
    if keyword.iskeyword(name) or name in RUST_KEYWORDS:
        lang = "Python" if keyword.iskeyword(name) else "Rust"
        return f"{name!r} is a {lang} keyword: it would name a {lang} module; pick another"
    if (kernels_dir / name).exists():
        return f"kernels/{name} exists already: pick another name, or edit that kernel"
    return None


# the prefixes of our own names around a kernel's (tests, exports, baselines.py's functions)
OWN_PREFIXES = ("test", "cutile", "triton", "torch", "liger", "tilegym")


def rename(text: str, old: str, new: str) -> str:
    """`old` -> `new` wherever it is the kernel's name, in one pass: `kernels.old`; an identifier
    that is `old` or starts with `old_` (`old_device`, `old_row_tail`, the folder in a path); one
    that is `<p>_old...` with p a prefix of ours (`cutile_old`, `test_old`, `triton_old`). Not
    another library's names: an attribute (`torch.softmax`, `gemm.triton_bmm`), a longer name that
    ends in the kernel's (`scaled_dot_product_attention`), another case (`LigerSoftmaxFunction`).

    >>> rename("import kernels.softmax.op as op; y = torch.softmax(x); cutile_softmax(); softmax_device", "softmax", "probe")
    'import kernels.probe.op as op; y = torch.softmax(x); cutile_probe(); probe_device'
    >>> rename("LigerSoftmaxFunction, ops.softmax, tests/kernels/test_softmax.py, softmax_row_tail", "softmax", "probe")
    'LigerSoftmaxFunction, ops.softmax, tests/kernels/test_probe.py, probe_row_tail'
    >>> rename("F.scaled_dot_product_attention(q); scaled_dot_product_attention; attention(q)", "attention", "probe")
    'F.scaled_dot_product_attention(q); scaled_dot_product_attention; probe(q)'
    >>> rename("gemm.triton_bmm, triton_bmm, kernels.rms_norm", "bmm", "x_bmm"), rename("kernels.rms_norm.op", "rms_norm", "fused_rms_norm")
    ('gemm.triton_bmm, triton_x_bmm, kernels.rms_norm', 'kernels.fused_rms_norm.op')
    """
    own = "|".join(OWN_PREFIXES)
    name = re.compile(rf"(?:(?P<prefix>(?:{own})_))?{re.escape(old)}(?P<rest>(?:_\w*)?)")

    def one(m: re.Match) -> str:
        word = m.group(0)
        if word.startswith("kernels."):
            return f"kernels.{new}" + word[len("kernels.") + len(old) :]
        if m.group("dot"):
            return word
        hit = name.fullmatch(word)
        return f"{hit['prefix'] or ''}{new}{hit['rest']}" if hit else word

    return re.sub(rf"kernels\.{re.escape(old)}\b|(?P<dot>\.)?\b[A-Za-z_]\w*", one, text)


def notes(name: str, source: str) -> str:
    return (
        f"# {name}\n\n"
        f"Written by `make new KERNEL={name} FROM={source}` from kernels/{source}/ (its NOTES.md has the story\n"
        "of that kernel). This file holds this kernel's: the floor (bytes and FLOPs of one call over the\n"
        "GPU's ceilings), each version's prediction and measured outcome, the sweeps (docs/kernels.md).\n"
    )


def scaffold(root: Path, name: str, source: str) -> list[Path]:
    """Write kernels/<name>/ from kernels/<source>/ and its suite stub; the files written."""
    kernels = root / "kernels"
    if not (kernels / source / "kernel.rs").is_file():
        known = sorted(p.parent.name for p in kernels.glob("*/kernel.rs"))
        raise ScaffoldError(f"FROM={source}: no kernels/{source}/kernel.rs; FROM is one of {', '.join(known)}")
    problem = name_error(name, kernels)
    if problem:
        raise ScaffoldError(f"KERNEL={name}: {problem}")
    written = []
    target = kernels / name
    target.mkdir()
    for path in sorted((kernels / source).iterdir()):
        if not path.is_file() or path.suffix == ".pyc":
            continue
        text = (
            notes(name, source) if path.name == "NOTES.md" else rename(path.read_text(encoding="utf-8"), source, name)
        )
        (target / path.name).write_text(text, encoding="utf-8")
        written.append(target / path.name)
    stub = root / "tests" / "kernels" / f"test_{name}.py"
    if not stub.exists():
        shutil.copy(root / "tests" / "kernels" / f"test_{source}.py", stub)
        written.append(stub)
    return written


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tilekit new", description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True, help="the new kernel (make's KERNEL)")
    p.add_argument("--from", dest="source", required=True, help="the kernel to start from (make's FROM)")
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[3], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        written = scaffold(args.root, args.name, args.source)
    except ScaffoldError as e:
        print(f"make new: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(f"make new: wrote {path.relative_to(args.root)}")
    n = args.name
    print(
        f"""make new: kernels/{n}/ is kernels/{args.source}/ renamed. Next:
  1. write its math: kernel.rs (device code), ffi.rs (plan, launch), op.py (entry, variants),
     spec.py (reference, shapes, bytes), baselines.py; NOTES.md (docs/kernels.md, "Add a kernel")
  2. make KERNEL={n} rust-test                       # its Rust tests: validation, lowering, sm_90 assembly
  3. python -m pytest tests -q -k {n}                # its CPU checks: declaration, export, bad inputs
  4. on a GPU host: make KERNEL={n} test perf        # correctness, then the verdict against its baselines
The CPU checks cannot tell a wrong formula: only step 4 compares the port's numbers with the reference."""
    )
    return 0

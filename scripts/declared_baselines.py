"""The baselines each kernel declares, for the Makefile's default BASELINES: the string keys of the
`BACKENDS` dict in kernels/<k>/baselines.py, the keywords of its `**providers.backends(...)` and,
for a family member, cutile, triton and torch where it unpacks its family's entries (a call whose name
ends in `entries`: `**gated_baselines.fused_entries(...)`, `**gemm.entries(...)`), read with `ast` (the file is not
imported: no torch, a few milliseconds per make call).

    python3 scripts/declared_baselines.py rms_norm matmul
    rms_norm=cutile,triton,torch,tilegym,liger,liger_cutile matmul=cutile,triton,torch,tilegym

A kernel whose baselines.py has no such dict prints `<k>=` and says why on stderr; the Makefile
stops with that message before anything runs.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = ("cutile", "triton", "torch")  # the keys of a family's *entries(...), in order


def _called(call: ast.Call) -> str:
    """The called function's name (`f` of `f(...)` or `m.f(...)`), or ''."""
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def declared(path: Path) -> list[str]:
    """The backend names of the module-level `BACKENDS = {...}` in `path`, in order; ValueError
    naming the file when there is none."""
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)):
            continue
        if not any(isinstance(t, ast.Name) and t.id == "BACKENDS" for t in node.targets):
            continue
        names = []
        for key, value in zip(node.value.keys, node.value.values):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names.append(key.value)
            elif key is None and isinstance(value, ast.Call) and _called(value).endswith("entries"):
                names += list(OURS)  # **gated_baselines.fused_entries(...): a family's own three
            elif key is None and isinstance(value, ast.Call):  # **providers.backends(name=..., ...)
                names += [kw.arg for kw in value.keywords if kw.arg]
        return names
    raise ValueError(
        f"{path}: no module-level `BACKENDS = {{...}}` dict literal (tilekit/runtime/kernel.py: each kernel declares one)"
    )


def main(kernels: list[str]) -> int:
    rc = 0
    out = []
    for k in kernels:
        try:
            names = declared(ROOT / "kernels" / k / "baselines.py")
        except (OSError, SyntaxError, ValueError) as e:
            print(f"declared_baselines: {e}", file=sys.stderr)
            names, rc = [], 1
        out.append(f"{k}={','.join(names)}")
    print(" ".join(out))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

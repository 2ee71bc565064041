"""Shape sweeps on the CPU (tilekit.testing.sweep, docs/sweep.md): the grids the kernels declare, SHARD=i/N
(deterministic, disjoint, covering, balanced), the test_sweep cases of the suites, the scheduler's
unit of a sweep case, the merge's refusals, sweep.csv / sweep.md / sweep.svg from fake records,
the make wiring (dry run), the example sbatch script under a fake srun and make, and the disk JIT
cache's folder. Every child process has a deadline (child_env.run)."""

import doctest
import json
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from child_env import TEST_TIMEOUT, child_env, run  # tests/kit/child_env.py
from perf_records import perf_block
from tilekit.runtime import ffi, kernel
from tilekit.testing import suite, sweep
from tilekit.testing.gpu_workers import unit_of

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)

ROOT = Path(__file__).resolve().parents[2]
KERNELS = kernel.names()


# ---------------------------------------------------------------------------------------------
# The grids


def test_doctests_of_the_grid_helpers_and_the_jit_key_pass():
    for module in (kernel, ffi):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__


def test_grid_leaves_none_keys_out_and_keep_drops_configs():
    configs = kernel.grid({"m": (1, 8, 64), "bt": (None, 1)}, keep=lambda c: c["m"] < 64)
    assert configs == [{"m": 1}, {"m": 1, "bt": 1}, {"m": 8}, {"m": 8, "bt": 1}]


@pytest.mark.parametrize("name", KERNELS)
def test_every_kernel_sweeps_a_few_dozen_quick_and_a_few_hundred_full_configs(name):
    spec = kernel.load(name)
    quick, full = sweep.configs(spec, "quick"), sweep.configs(spec, "full")
    assert 12 <= len(quick) <= 60 and 150 <= len(full) <= 400, (len(quick), len(full))
    ids = [sweep.case_id(spec, c) for c in full]
    assert len(set(ids)) == len(ids), "two configs of the grid share a test id"
    assert {c["dtype"] for c in full} <= set(spec.dtypes)


def test_matmul_sweeps_decode_rows_and_column_major_b():
    spec = kernel.load("matmul")
    full = sweep.configs(spec, "full")
    assert len(sweep.configs(spec, "quick")) == 24 and len(full) == 288
    assert {1, 16, 64} <= {c["m"] for c in full}
    assert sum("bt" in c for c in full) == len(full) // 2
    assert (
        sweep.case_id(spec, {"m": 16, "n": 4096, "k": 4096, "bt": 1, "dtype": "bfloat16"})
        == "16x4096x4096-bt1-bfloat16"
    )


def test_row_default_drops_configs_over_the_byte_cap_and_those_size_check_refuses():
    op = SimpleNamespace(DTYPES=("float16",))

    def refuse_wide(m, n):
        if n > 32768:
            raise ValueError("too wide")

    grid = kernel.row_sweep(op, "n", bytes_moved=lambda c: 4 * c["m"] * c["n"], size_check=refuse_wide)
    full = grid["full"]
    assert full and all(4 * c["m"] * c["n"] <= kernel.ROW_SWEEP_BYTES and c["n"] <= 32768 for c in full)
    assert {"dtype": "float16", "m": 65536, "n": 16384} in full  # exactly 4 GiB: kept
    assert {"dtype": "float16", "m": 262144, "n": 8192} not in full


def test_a_kernel_without_a_sweep_is_swept_over_its_perf_configs():
    spec = kernel.load("matmul")
    bare = type(spec)(**{**spec.__dict__, "sweep": {}})
    assert sweep.configs(bare, "full") == spec.perf_configs


def test_the_declaration_check_names_a_sweep_config_without_a_dim_and_an_unknown_size():
    spec = kernel.load("rms_norm")
    bad = type(spec)(**{**spec.__dict__, "sweep": {"quick": [{"m": 1, "dtype": "float16"}], "huge": []}})
    assert bad.problems() == [
        "sweep has ['huge', 'quick']: its sizes are ['quick', 'full'] (sweep_grid)",
        "sweep: {'m': 1, 'dtype': 'float16'} must have ['m', 'n'] and only ['dtype', 'm', 'n', 'row_stride']",
    ]


def test_the_kit_version_changes_with_the_code_not_with_the_notes(tmp_path, monkeypatch):
    for rel in ("tools/tilekit/a.py", "kernels/k/op.py", "kernels/k/NOTES.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("1")
    monkeypatch.setenv("TILEKIT_LIB", str(tmp_path / "lib.so"))
    version = sweep.kit_version.__wrapped__
    first = version(tmp_path)
    (tmp_path / "kernels/k/NOTES.md").write_text("2")
    assert version(tmp_path) == first
    (tmp_path / "kernels/k/op.py").write_text("2")
    assert version(tmp_path) != first


def test_an_unknown_size_is_refused_naming_the_sizes():
    with pytest.raises(sweep.SweepError, match=r"SWEEP='huge': use one of quick, full"):
        sweep.configs(kernel.load("softmax"), "huge")
    with pytest.raises(sweep.SweepError, match="SWEEP='huge'"):
        sweep.from_env({sweep.SIZE_VAR: "huge"})
    assert sweep.from_env({}) is None


# ---------------------------------------------------------------------------------------------
# Shards


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b", "1/0"])
def test_a_bad_shard_is_refused_naming_the_form(text):
    with pytest.raises(sweep.SweepError, match=r"use i/N with 1 <= i <= N"):
        sweep.parse_shard(text)


def test_shard_parses_and_names_its_folder():
    assert sweep.parse_shard("") == (1, 1) and sweep.parse_shard(" 2 / 4 ") == (2, 4)
    assert sweep.shard_dir((2, 4)) == "shard-2-of-4" and sweep.shard_dir((1, 1)) == ""


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_shards_are_disjoint_cover_the_grid_and_balance_count_and_cost(name, count):
    spec = kernel.load(name)
    grid = sweep.configs(spec, "full")
    shards = [sweep.shard(spec, grid, i, count) for i in range(1, count + 1)]
    ids = [[sweep.case_id(spec, c) for c in s] for s in shards]
    flat = [i for s in ids for i in s]
    assert sorted(flat) == sorted(sweep.case_id(spec, c) for c in grid) and len(set(flat)) == len(flat)
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    costs = [sum(sweep.cost(spec, c) for c in s) for s in shards]
    assert max(costs) - min(costs) <= max(sweep.cost(spec, c) for c in grid)  # at most one case apart
    # deterministic: the declaration's order does not matter
    again = [[sweep.case_id(spec, c) for c in sweep.shard(spec, grid[::-1], i, count)] for i in range(1, count + 1)]
    assert again == ids


def test_a_shards_cases_come_costliest_first():
    spec = kernel.load("rms_norm")
    mine = sweep.cases(spec, "full", "2/3")
    costs = [sweep.cost(spec, c) for c in mine]
    assert costs == sorted(costs, reverse=True) and len(mine) == len(sweep.configs(spec, "full")) // 3


# ---------------------------------------------------------------------------------------------
# The suites' test_sweep and the scheduler


def test_the_suite_has_test_sweep_cases_only_when_a_sweep_is_asked_for():
    spec = kernel.load("softmax")
    assert "test_sweep" not in suite.cases(spec)
    params = suite.cases(spec, ("quick", "1/2"))["test_sweep"]
    mine = sweep.cases(spec, "quick", "1/2")
    assert len(params) == len(mine) * len(suite.harness.BACKEND_IDS)
    first = sweep.case_id(spec, mine[0])
    assert [p.id for p in params[:2]] == [f"cutile_rs-{first}", f"cutile_py-{first}"]


def test_the_scheduler_hands_out_sweep_cases_alone_and_perf_cases_by_stage():
    assert unit_of("tests/kernels/test_softmax.py::test_sweep[triton-4096x1000-float16]").endswith("float16]")
    assert unit_of("tests/kernels/test_softmax.py::test_perf[triton-4096x1000-float16]") == ("softmax", "triton")


# ---------------------------------------------------------------------------------------------
# Merge and render from fake records

GPU = "NVIDIA H200"


def block(backend, n, median, *, gpu=GPU, kit="abc123", size="quick 1/2", host="node1", dtype="float16"):
    env = {"gpu": gpu, "cutile_crate": "0.5.0", "tileiras": "V13.3.0"}
    return perf_block(
        backend,
        {"dtype": dtype, "m": 4096, "n": n},
        median,
        kernel="softmax",
        test=f"tests/kernels/test_softmax.py::test_sweep[{backend}-4096x{n}-{dtype}]",
        gbps=round(4096 * n * 4 / median / 1e6, 2),
        peak_gbps=4800.0,
        env=env,
        host=host,
        kit=kit,
        sweep=size,
    )


def write_log(kernel_dir: Path, shard: str, backend: str, blocks: list[str]) -> Path:
    sub = kernel_dir / "sweep" / shard / "logs" if shard else kernel_dir / "sweep" / "logs"
    sub.mkdir(parents=True, exist_ok=True)
    path = sub / f"sweep_{backend.replace('-', '_')}.full.txt"
    path.write_text("\n".join(blocks) + "\n==== 2 passed in 1.00s ====\n")
    return path


def two_shards(tmp_path: Path, **second) -> Path:
    """softmax's sweep in two shards: n=1024 on node1 (port wins), n=4096 on node2 (port loses)."""
    kdir = tmp_path / "softmax"
    write_log(kdir, "shard-1-of-2", "cutile-rs", [block("cutile-rs", 1024, 0.09)])
    write_log(kdir, "shard-1-of-2", "triton", [block("triton", 1024, 0.10)])
    write_log(kdir, "shard-1-of-2", "torch", [block("torch", 1024, 0.12)])
    kw = {"host": "node2", "size": "quick 2/2", **second}
    write_log(kdir, "shard-2-of-2", "cutile-rs", [block("cutile-rs", 4096, 0.30, **kw)])
    write_log(kdir, "shard-2-of-2", "triton", [block("triton", 4096, 0.24, **kw)])
    write_log(kdir, "shard-2-of-2", "torch", [block("torch", 4096, 0.20, **kw)])
    return kdir


def cli(*args) -> tuple[int, str, str]:
    done = run([sys.executable, "-m", "tilekit", "sweep", *args], env=child_env(), cwd=ROOT)
    return done.returncode, done.stdout, done.stderr


def test_merge_writes_csv_md_and_chart_from_the_shards(tmp_path):
    kdir = two_shards(tmp_path)
    code, out, err = cli("merge", "--kernel", "softmax", "--dir", str(kdir))
    assert code == 0, err
    csv_text = (kdir / "sweep" / "sweep.csv").read_text()
    assert csv_text.splitlines() == [
        ",".join(sweep.CSV_HEADER),
        'softmax,"{""dtype"": ""float16"", ""m"": 4096, ""n"": 1024}",float16,cutile-rs,0.090000,186.41,,3.9,triton,0.9000,node1,NVIDIA H200',
        'softmax,"{""dtype"": ""float16"", ""m"": 4096, ""n"": 1024}",float16,torch,0.120000,139.81,,2.9,triton,1.2000,node1,NVIDIA H200',
        'softmax,"{""dtype"": ""float16"", ""m"": 4096, ""n"": 1024}",float16,triton,0.100000,167.77,,3.5,triton,1.0000,node1,NVIDIA H200',
        'softmax,"{""dtype"": ""float16"", ""m"": 4096, ""n"": 4096}",float16,cutile-rs,0.300000,223.70,,4.7,torch,1.5000,node2,NVIDIA H200',
        'softmax,"{""dtype"": ""float16"", ""m"": 4096, ""n"": 4096}",float16,torch,0.200000,335.54,,7.0,torch,1.0000,node2,NVIDIA H200',
        'softmax,"{""dtype"": ""float16"", ""m"": 4096, ""n"": 4096}",float16,triton,0.240000,279.62,,5.8,torch,1.2000,node2,NVIDIA H200',
    ]
    md = (kdir / "sweep" / "sweep.md").read_text()
    table = [line for line in md.splitlines() if line.startswith("| dtype=")]
    assert [line.split("|")[5].strip() for line in table] == ["1.5000", "0.9000"]  # worst first
    assert (
        "loses (ratio to the best baseline > 1.05) on 1; worst 1.5000 at dtype=float16, m=4096, n=4096 (vs torch)" in md
    )
    assert "hosts: node1, node2" in md and "Merged from 6 logs of 2 shards." in md
    assert "geomean ratio to the best baseline: 1.1619" in md  # sqrt(1.5 * 0.9)
    records = (kdir / "sweep" / "records.txt").read_text()
    assert records.count("==== Performance Test Results ====") == 6
    if (kdir / "sweep" / "sweep.svg").exists():  # matplotlib is a dependency; the chart names its grid
        assert "softmax: sweep over 2 configs" in (kdir / "sweep" / "sweep.svg").read_text()
        assert "sweep.svg" in md


@pytest.mark.parametrize(
    "second,what",
    [({"gpu": "NVIDIA H100 80GB HBM3"}, "GPU model"), ({"kit": "def456"}, "kit"), ({"size": "full 2/2"}, "SWEEP")],
)
def test_merge_refuses_a_mix_naming_the_files(tmp_path, second, what):
    kdir = two_shards(tmp_path, **second)
    code, out, err = cli("merge", "--kernel", "softmax", "--dir", str(kdir))
    assert code == 2 and not (kdir / "sweep" / "sweep.csv").exists()
    assert f"these sweep records differ in {what}" in err
    assert "shard-1-of-2/logs/sweep_cutile_rs.full.txt" in err and "shard-2-of-2/logs/sweep_torch.full.txt" in err


def test_merge_refuses_a_missing_shard_naming_the_command(tmp_path):
    kdir = two_shards(tmp_path)
    for path in (kdir / "sweep" / "shard-2-of-2" / "logs").iterdir():
        path.unlink()
    code, _, err = cli("merge", "--kernel", "softmax", "--dir", str(kdir))
    assert code == 2 and "shard 2/2 missing: run make KERNEL=softmax SHARD=2/2 sweep" in err


def test_merge_refuses_shards_of_two_runs_and_a_config_timed_twice(tmp_path):
    kdir = two_shards(tmp_path)
    write_log(kdir, "shard-1-of-3", "triton", [block("triton", 8192, 0.5)])
    code, _, err = cli("merge", "--kernel", "softmax", "--dir", str(kdir))
    assert code == 2 and "shards of different runs (N = 2, 3)" in err
    kdir = two_shards(tmp_path / "again")
    write_log(kdir, "shard-2-of-2", "triton", [block("triton", 1024, 0.11, host="node2", size="quick 2/2")])
    code, _, err = cli("merge", "--kernel", "softmax", "--dir", str(kdir))
    assert code == 2 and "is timed twice" in err and "shard-1-of-2/logs/sweep_triton.full.txt:1" in err


def test_report_of_a_whole_run_and_its_missing_logs(tmp_path):
    kdir = tmp_path / "softmax"
    code, _, err = cli("report", "--kernel", "softmax", "--dir", str(kdir))
    assert code == 2 and "no sweep logs: run make KERNEL=softmax sweep first" in err
    write_log(kdir, "", "cutile-rs", [block("cutile-rs", 1024, 0.09, size="quick 1/1")])
    write_log(
        kdir,
        "",
        "triton",
        [block("triton", 1024, 0.10, size="quick 1/1"), block("triton", 2048, 0.2, size="quick 1/1")],
    )
    code, out, err = cli("report", "--kernel", "softmax", "--dir", str(kdir))
    assert code == 0, err
    md = (kdir / "sweep" / "sweep.md").read_text()
    assert "configs compared: 1;" in md and "- dtype=float16, m=4096, n=2048: missing_port" in md


def test_plan_prints_each_kernels_cases_and_refuses_a_bad_shard():
    code, out, _ = cli("plan", "--size", "quick", "--shard", "1/2", "--backends", "cutile_rs,triton", "matmul")
    assert code == 0 and "sweep quick shard 1/2: matmul: 12 of 24 configs x 2 backends" in out
    assert out.strip().endswith("sweep: 24 timed cases")
    code, _, err = cli("plan", "--size", "quick", "--shard", "3/2", "matmul")
    assert code == 2 and "SHARD='3/2': use i/N" in err


# ---------------------------------------------------------------------------------------------
# make and the sbatch example


def make_dry(*args) -> str:
    env = {k: v for k, v in child_env().items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = run(["make", "--no-print-directory", "-n", *args], cwd=ROOT, env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_sweep_runs_test_sweep_of_port_and_baselines_into_the_shards_folder():
    out = make_dry("KERNEL=rms_norm", "SWEEP=quick", "SHARD=2/3", "BASELINES=triton torch", "sweep")
    assert "-m tilekit sweep plan --size 'quick' --shard '2/3' --backends 'cutile_rs,triton,torch' rms_norm" in out
    assert (
        "TILEKIT_SWEEP='quick' TILEKIT_SHARD='2/3' scripts/pytest_stage.sh out/rms_norm/sweep/sweep-shard-2-of-3.session.txt"
        in out
    )
    assert "-k 'test_sweep and ([cutile_rs- or [triton- or [torch-)'" in out
    assert "--stage-log 'out/{kernel}/sweep/shard-2-of-3/logs/sweep_{backend}.full.txt'" in out
    assert "rm -rf out/rms_norm/sweep/shard-2-of-3/logs" in out
    assert "make KERNEL=rms_norm sweep-merge" in out and "sweep report" not in out


def test_make_sweep_of_all_kernels_is_one_session_then_each_report():
    out = make_dry("KERNEL=all", "sweep")
    files = " ".join(f"tests/kernels/test_{k}.py" for k in KERNELS)
    assert "--size 'full' --shard ''" in out and files in out
    assert "--stage-log 'out/{kernel}/sweep/logs/sweep_{backend}.full.txt'" in out
    assert f"for k in {' '.join(KERNELS)}; do" in out and "sweep report --kernel $k --dir out/$k" in out
    merge = make_dry("KERNEL=all", "OUT_ROOT=/shared/o", "sweep-merge")
    assert "sweep merge --kernel $k --dir /shared/o/$k" in merge


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


FAKE_SRUN = """#!/usr/bin/env bash
# srun: drop its options, note the call, run the command
while [ "${1:-}" != "${1#-}" ]; do shift; done
echo "srun $*" >>"$FAKE_CALLS"
exec "$@"
"""

# make: time nothing; write this shard's logs as make sweep would, from $FAKE_PORT_<i> / $FAKE_TRITON_<i>
FAKE_MAKE = """#!/usr/bin/env bash
echo "make $*" >>"$FAKE_CALLS"
for a in "$@"; do case $a in SHARD=*) shard=${a#SHARD=} ;; OUT_ROOT=*) out=${a#OUT_ROOT=} ;; esac; done
i=${shard%/*} n=${shard#*/}
d="$out/softmax/sweep/shard-$i-of-$n/logs"
mkdir -p "$d"
port=FAKE_PORT_$i triton=FAKE_TRITON_$i
printf '%s\\n' "${!port}" >"$d/sweep_cutile_rs.full.txt"
printf '%s\\n' "${!triton}" >"$d/sweep_triton.full.txt"
"""


def test_the_sbatch_example_runs_one_shard_per_array_task_and_the_shards_merge(tmp_path):
    bin_dir, out_root = tmp_path / "bin", tmp_path / "shared-out"
    bin_dir.mkdir()
    executable(bin_dir / "srun", FAKE_SRUN)
    executable(bin_dir / "make", FAKE_MAKE)
    calls = tmp_path / "calls.txt"
    records = {}
    for i, (n, port, triton) in enumerate(((1024, 0.09, 0.10), (4096, 0.30, 0.24)), start=1):
        kw = {"host": f"node{i}", "size": f"quick {i}/2"}
        records[f"FAKE_PORT_{i}"] = block("cutile-rs", n, port, **kw)
        records[f"FAKE_TRITON_{i}"] = block("triton", n, triton, **kw)
    for task in (7, 8):  # an array --array=7-8: tasks 7 and 8 are shards 1/2 and 2/2
        env = child_env(
            PATH=f"{bin_dir}:{os.environ['PATH']}",
            FAKE_CALLS=str(calls),
            SLURM_SUBMIT_DIR=str(ROOT),
            SLURM_ARRAY_TASK_ID=str(task),
            SLURM_ARRAY_TASK_MIN="7",
            SLURM_ARRAY_TASK_COUNT="2",
            **records,
        )
        done = run(
            ["bash", str(ROOT / "scripts" / "sweep.sbatch"), "KERNEL=softmax", "SWEEP=quick", f"OUT_ROOT={out_root}"],
            env=env,
        )
        assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == [
        f"srun make KERNEL=softmax SWEEP=quick OUT_ROOT={out_root} SHARD=1/2 sweep",
        f"make KERNEL=softmax SWEEP=quick OUT_ROOT={out_root} SHARD=1/2 sweep",
        f"srun make KERNEL=softmax SWEEP=quick OUT_ROOT={out_root} SHARD=2/2 sweep",
        f"make KERNEL=softmax SWEEP=quick OUT_ROOT={out_root} SHARD=2/2 sweep",
    ]
    code, _, err = cli("merge", "--kernel", "softmax", "--dir", str(out_root / "softmax"))
    assert code == 0, err
    rows = (out_root / "softmax" / "sweep" / "sweep.csv").read_text().splitlines()[1:]
    assert [r.split(",")[-4:-2] for r in rows] == [
        ["triton", "0.9000"],
        ["triton", "1.0000"],
        ["triton", "1.2500"],
        ["triton", "1.0000"],
    ]


def test_the_sbatch_example_refuses_to_run_outside_an_array():
    env = {k: v for k, v in child_env().items() if not k.startswith("SLURM_")}
    done = run(["bash", str(ROOT / "scripts" / "sweep.sbatch"), "KERNEL=softmax"], env=env)
    assert done.returncode != 0 and "submit as an array job: sbatch --array=1-N" in done.stderr


# ---------------------------------------------------------------------------------------------
# The disk JIT cache's folder


def fake_torch(name="NVIDIA H200", cc=(9, 0)):
    cuda = SimpleNamespace(is_available=lambda: True, get_device_capability=lambda: cc, get_device_name=lambda: name)
    return SimpleNamespace(cuda=cuda)


def test_the_jit_cache_folder_is_keyed_by_toolchain_gpu_and_crate(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    monkeypatch.setattr("tilekit.runtime.bench.tileiras_release", lambda: "V13.3.0")
    monkeypatch.setattr("tilekit.runtime.bench.cutile_crate_version", lambda: "0.5.0")
    env = {"TILEKIT_CACHE": "/c"}
    h200 = ffi.set_jit_cache_env(env)
    assert h200 == env[ffi.JIT_CACHE_VAR] and h200.startswith("/c/jit/sm90-tileiras13.3.0-cutile0.5.0-")
    monkeypatch.setitem(sys.modules, "torch", fake_torch("NVIDIA H100 80GB HBM3"))
    h100 = ffi.set_jit_cache_env({"TILEKIT_CACHE": "/c"})
    assert h100 != h200 and h100.startswith("/c/jit/sm90-tileiras13.3.0-")  # same arch, another GPU: another folder
    monkeypatch.setattr("tilekit.runtime.bench.tileiras_release", lambda: "V13.4.0")
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    assert ffi.set_jit_cache_env({"TILEKIT_CACHE": "/c"}) not in (h200, h100)


def test_the_jit_cache_honours_the_callers_setting_and_needs_a_gpu(monkeypatch):
    assert ffi.set_jit_cache_env({ffi.JIT_CACHE_VAR: "/mine"}) == "/mine"
    assert ffi.set_jit_cache_env({ffi.JIT_CACHE_VAR: ""}) is None  # empty: no disk cache
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    env = {}
    assert ffi.set_jit_cache_env(env) is None and env == {}  # torch not imported: the CLI's ABI check


@pytest.mark.skipif(not ffi.library_path().is_file(), reason="no built library (make build)")
def test_the_library_reports_its_jit_counters():
    stats = ffi.Library().jit_stats()
    if stats is None:
        pytest.skip(f"{ffi.library_path()} predates the tilekit_jit_stats export: make build")
    assert stats == {"compiles": 0, "enabled": False, "hits": 0, "misses": 0, "puts": 0, "io_errors": 0}


ENABLE_SCRIPT = """
import json, torch
from tilekit.runtime import ffi, kernel
lib, spec = ffi.Library(), kernel.load("softmax")
inputs = spec.make_inputs(spec.ffi_example, device="cpu", seed=0)
args = [lib.pack(t) if isinstance(t, torch.Tensor) else t for t in (spec.make_out(spec.ffi_example, inputs), *inputs.values())]
try:
    lib.call("softmax", "cutile_softmax", *args, *spec.export_args(spec.op.DEFAULT_VARIANT, 132), 4096, 0)
except ffi.KernelError as e:
    print(e.code, json.dumps(lib.jit_stats()))
"""


@pytest.mark.skipif(not ffi.library_path().is_file(), reason="no built library (make build)")
@pytest.mark.parametrize("setting", ["folder", "empty"])
def test_the_library_opens_the_disk_jit_cache_that_tilekit_jit_cache_names_at_its_first_launch(tmp_path, setting):
    """A valid call on a device no machine has reaches the device set-up (-4), where the library
    opens the cache first: a new process, so that the library's once-per-process switch is fresh."""
    if ffi.Library().jit_stats() is None:
        pytest.skip(f"{ffi.library_path()} predates the tilekit_jit_stats export: make build")
    folder = tmp_path / "jit" / "key"
    env = child_env(**{ffi.JIT_CACHE_VAR: str(folder) if setting == "folder" else ""})
    done = run([sys.executable, "-c", ENABLE_SCRIPT], env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    code, stats = done.stdout.split(" ", 1)
    assert code == "-4" and json.loads(stats)["enabled"] is (setting == "folder")
    assert folder.is_dir() is (setting == "folder")


# ---------------------------------------------------------------------------------------------
# scripts/sweep_variants.py


def _script(name: str):
    """scripts/<name>.py imported as a module (scripts/ is no package)."""
    import importlib.util

    loader = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def test_sweep_variants_extra_null_knob_is_the_default_and_no_repeat():
    """--extra '[{"warps": null, ...}]' means the export's default, as in op.py's lists (a null used to
    reach int() and fail the variant), and a variant op.py already lists is timed once."""
    module = _script("sweep_variants")
    spec = SimpleNamespace(variants=lambda cfg: [{"block": 8, "rows": 1}], run_port=lambda inputs, variant: variant)
    extra = [{"block": 8, "rows": 1, "warps": None}, {"block": 16, "rows": 2, "warps": None}]
    calls = module.calls_for("cutile_rs", spec, None, {}, {}, extra)
    assert [c() for c in calls.values()] == [{"block": 8, "rows": 1}, {"block": 16, "rows": 2}]
    only = module.calls_for("cutile_rs", spec, None, {}, {}, extra, only_extra=True)
    assert [c() for c in only.values()] == [{"block": 8, "rows": 1}, {"block": 16, "rows": 2}]
    assert [c() for c in module.calls_for("cutile_rs", spec, None, {}, {}, extra[1:], True).values()] == [
        {"block": 16, "rows": 2}
    ]


def test_sweep_variants_only_extra_needs_extra(capsys):
    """--only-extra without --extra would time no port variant at all: argparse's error says so."""
    module = _script("sweep_variants")
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--kernel", "rms_norm", "--only-extra"])
    assert exit_info.value.code == 2
    assert "--only-extra times the --extra variants alone" in capsys.readouterr().err


def test_sweep_variants_summary_gives_each_baseline_the_ports_ratio():
    """Per config: each backend's fastest, and for a baseline the port's fastest over it; no ratio
    where the port did not run the config."""
    module = _script("sweep_variants")
    best = {
        ("bfloat16  m=256 n=4096", "cutile_rs"): ('{"block": 4096}', 0.002208),
        ("bfloat16  m=256 n=4096", "liger"): ("-", 0.002304),
        ("bfloat16  m=64 n=4096", "liger"): ("-", 0.0019),
    }
    lines = module.summary_lines(best)
    assert lines[1].startswith("fastest per config and backend (port / baseline")
    assert lines[2] == '  bfloat16  m=256 n=4096 cutile_rs   0.002208 ms  {"block": 4096}'
    assert lines[3] == "  bfloat16  m=256 n=4096 liger       0.002304 ms  -  port / liger 0.9583"
    assert lines[4] == "  bfloat16  m=64 n=4096 liger       0.001900 ms  -"


def test_sweep_variants_kernel_lines_put_the_slowest_kernel_first_with_its_share():
    module = _script("sweep_variants")
    lines = module.kernel_lines({"ce_rows": 0.5, "matmul_tiles<bf16>": 1.5, "x" * 200: 0.0}, 2.0)
    assert lines[0] == "      1.500000 ms  75.0%  matmul_tiles<bf16>"
    assert lines[1] == "      0.500000 ms  25.0%  ce_rows"
    assert lines[2].endswith("x" * 120) and len(lines) == 3


def test_sweep_variants_launch_lines_keep_the_launch_order():
    lines = _script("sweep_variants").kernel_lines({"#1 mm": 0.5, "#2 ce": 0.1, "#3 mm": 1.4}, 2.0, ordered=True)
    assert [line.split()[-1] for line in lines] == ["mm", "ce", "mm"] and "70.0%" in lines[2]


def test_profile_by_launch_keeps_one_kernel_function_launched_three_times_apart(monkeypatch):
    """tilekit.testing.model.profile on a fake profiler: by name the three launches of one function
    sum; with launches=True each is its own median, keyed in launch order."""
    import contextlib

    import torch

    from tilekit.runtime import bench
    from tilekit.testing import model

    calls = iter(range(100))

    def acts(_prof):  # sample k: products of 1, 2, 3 ms (+k/100), the loss pass 0.5 between them
        k = next(calls)
        return [("mm", 1 + k / 100), ("ce", 0.5), ("mm", 2 + k / 100), ("mm", 3 + k / 100)]

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(bench, "_flush_buffer", lambda _i: torch.zeros(1))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.profiler, "profile", lambda **_kw: contextlib.nullcontext())
    monkeypatch.setattr(bench, "device_activities", acts)
    by_name = model.profile(lambda: None, 3, warmup=0)
    assert by_name["kernels"] == {"mm": pytest.approx(6.03), "ce": 0.5}
    by_launch = model.profile(lambda: None, 3, warmup=0, launches=True)  # samples k = 3, 4, 5
    assert list(by_launch["kernels"]) == ["#1 mm", "#2 ce", "#3 mm", "#4 mm"]
    assert by_launch["kernels"]["#4 mm"] == pytest.approx(3.04) and by_launch["median_ms"] == pytest.approx(6.62)
    with pytest.raises(SystemExit):
        _script("sweep_variants").main(["--kernel", "rms_norm", "--kernels", "--launches"])


# ---------------------------------------------------------------------------------------------
# scripts/ncu_probe.py


def _ncu_probe():
    return _script("ncu_probe")


def test_ncu_probe_parses_shapes_variant_and_baselines():
    spec, configs, variant, baselines = _ncu_probe().parse(
        ["--kernel", "silu_and_mul", "--shapes", '[{"dtype": "bfloat16", "m": 256, "h": 14336}]']
        + ["--variant", '{"block": 1024, "rows": 1}', "--baselines", "triton", "torch"]
    )
    assert spec.name == "silu_and_mul"
    assert configs == [{"dtype": "bfloat16", "m": 256, "h": 14336}]
    assert variant == {"block": 1024, "rows": 1}
    assert baselines == ["triton", "torch"]
    assert (
        _ncu_probe().parse(["--kernel", "rms_norm", "--shapes", '[{"dtype": "float16", "m": 1, "n": 8}]'])[2] == "auto"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--shapes", "[{"], "--shapes takes JSON"),
        (["--shapes", "[{}]", "--variant", "{block"], "--variant takes JSON"),
        (["--shapes", "[{}]", "--variant", "5"], "--variant must be a JSON dict"),
        (["--shapes", '{"m": 1}'], "--shapes must be a JSON list"),
        (["--shapes", "[]"], "--shapes must list at least one JSON object"),
        (["--shapes", '[{"dtype": "bfloat16", "m": 256}]'], "lacks ['n']"),
        (
            ["--shapes", '[{"dtype": "bfloat16", "m": 1, "n": 1}]', "--baselines", "cublas"],
            "['cublas'] are not baselines",
        ),
    ],
)
def test_ncu_probe_bad_input_names_the_flag(argv, message, capsys):
    """Bad input stops before any CUDA call, with argparse's exit 2 and the flag and the fix named."""
    with pytest.raises(SystemExit) as exit_info:
        _ncu_probe().parse(["--kernel", "rms_norm", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_ncu_probe_unknown_kernel_lists_the_kernels(capsys):
    with pytest.raises(SystemExit) as exit_info:
        _ncu_probe().parse(["--kernel", "rms_nrom", "--shapes", "[{}]"])
    assert exit_info.value.code == 2
    assert "--kernel rms_nrom: no kernels/rms_nrom/spec.py; one of: " in capsys.readouterr().err


def test_ncu_probe_profiles_one_call_each_after_three_warm_ups(monkeypatch, capsys):
    """Three warm-up calls each, then, between the profiler's start and stop, one call each inside its
    NVTX range, port first per shape; a baseline that cannot run here is skipped with its reason."""
    module = _ncu_probe()
    events = []
    baselines = SimpleNamespace(unavailable_reason=lambda b: "no liger here" if b == "liger" else None)
    spec = SimpleNamespace(
        baselines=lambda: baselines,
        make_inputs=lambda cfg: {"m": cfg["m"]},
        run_port=lambda inputs, variant: events.append(("port", inputs["m"], variant)),
        run_baseline=lambda b, inputs: events.append((b, inputs["m"])),
    )
    monkeypatch.setattr(module, "parse", lambda argv: (spec, [{"m": 1}, {"m": 2}], "auto", ["triton", "liger"]))
    cuda = SimpleNamespace(
        synchronize=lambda: None,
        cudart=lambda: SimpleNamespace(
            cudaProfilerStart=lambda: events.append("start"), cudaProfilerStop=lambda: events.append("stop")
        ),
        nvtx=SimpleNamespace(
            range_push=lambda name: events.append(("push", name)), range_pop=lambda: events.append("pop")
        ),
    )
    monkeypatch.setattr(module, "torch", SimpleNamespace(cuda=cuda))
    module.main([])
    calls = [("port", 1, "auto"), ("triton", 1), ("port", 2, "auto"), ("triton", 2)]
    warm = [c for c in calls for _ in range(3)]
    profiled = []
    for c, name in zip(calls, ["{'m': 1} port", "{'m': 1} triton", "{'m': 2} port", "{'m': 2} triton"]):
        profiled += [("push", name), c, "pop"]
    assert events == warm + ["start"] + profiled + ["stop"]
    assert "skipped liger: no liger here" in capsys.readouterr().out


def test_the_decode_probe_finds_its_modules_from_any_folder(tmp_path):
    """scripts/probe_decode_attention.py imports kernels.attention and tilekit itself: run from
    another folder with no PYTHONPATH (as the H100 run of 2026-12-07 did, which stopped at the
    import), with no shapes it loads them and ends without touching a GPU."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = Path(__file__).resolve().parents[2] / "scripts" / "probe_decode_attention.py"
    done = run([sys.executable, str(script), "--shapes", "[]"], timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]

"""tilekit.testing.fingerprint: the timing environment make's timed stages depend on, written only when it
changes (so an unchanged host re-times nothing and a new GPU, driver or package re-times all)."""

import subprocess

from tilekit.testing import fingerprint


def fake_run(outputs: dict):
    """A subprocess.run stand-in answering by the command's first word (missing: OSError)."""

    def run(argv, **_):
        if argv[0] not in outputs:
            raise FileNotFoundError(argv[0])
        rc, out = outputs[argv[0]]
        return subprocess.CompletedProcess(argv, rc, stdout=out, stderr="")

    return run


def test_gpus_are_counted_per_model_and_driver():
    run = fake_run({"nvidia-smi": (0, "NVIDIA H200, 580.95.05\nNVIDIA H200, 580.95.05\n")})
    assert fingerprint.gpus(run) == "2 x NVIDIA H200 (driver 580.95.05)"


def test_no_driver_and_no_gpu_say_so():
    assert fingerprint.gpus(fake_run({})) == "none (nvidia-smi not found or not answering)"
    assert fingerprint.gpus(fake_run({"nvidia-smi": (9, "")})) == "none (nvidia-smi lists no GPU)"


def test_tileiras_gives_its_release_line():
    banner = "tileiras: NVIDIA (R) Cuda Tile IR optimizing assembler\nCuda compilation tools, release 13.4, V13.4.92\nBuild x\n"
    assert fingerprint.tileiras(fake_run({"tileiras": (0, banner)})) == "Cuda compilation tools, release 13.4, V13.4.92"
    assert fingerprint.tileiras(fake_run({})) == "not found"


def test_the_text_names_gpu_packages_and_compiler():
    text = fingerprint.fingerprint_text(fake_run({"nvidia-smi": (0, "NVIDIA H200, 580\n")}))
    assert "gpu: 1 x NVIDIA H200 (driver 580)\n" in text and "tileiras: not found\n" in text
    assert "\ntorch: " in text and "\ncuda-tile: " in text and "\nliger-kernel: " in text


def test_the_file_is_rewritten_only_when_its_text_changes(tmp_path):
    path = tmp_path / "o" / ".timing-env.txt"
    assert fingerprint.write_if_changed(str(path), "a\n") is True
    mtime = path.stat().st_mtime_ns
    assert fingerprint.write_if_changed(str(path), "a\n") is False
    assert path.stat().st_mtime_ns == mtime
    assert fingerprint.write_if_changed(str(path), "b\n") is True and path.read_text() == "b\n"


def test_cli_usage_error_without_a_file():
    assert fingerprint.main([]) == 2

"""``tvms tune`` and ``tvms opt --database``: the exit-code contract and the space file, which is
interpreted by the trace interpreter, never executed."""
from __future__ import annotations

import importlib.util
import threading

import pytest
from tune_standins import MATMUL

from tvms.cli import main
from tvms.lowering.tune import tune


def module_text(n: int) -> str:
    body = "".join("    " + line + "\n" if line else "\n" for line in MATMUL.replace("N", str(n)).splitlines())
    return "@I.ir_module\nclass Module:" + body


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_usage_errors_exit_2(tmp_path, capsys) -> None:
    model = write(tmp_path, "mm.tvms", MATMUL.replace("N", "16"))
    work = tmp_path / "tune"
    work.mkdir()
    (work / "database_tuning_record.json").write_text('[0, [[], [], [], null, null, null]]\n')
    assert main(["tune", model, "--work-dir", str(work)]) == 2  # a database there, no --resume
    assert "--resume" in capsys.readouterr().err
    assert main(["tune", model, "--work-dir", str(tmp_path / "w"), "--trials", "0"]) == 2
    assert main(["tune", model, "--work-dir", str(tmp_path / "w"), "--target", "nonsense"]) == 2
    assert main(["tune", str(tmp_path / "missing.tvms"), "--work-dir", str(tmp_path / "w")]) == 2
    assert main(["tune", model, "--work-dir", str(tmp_path / "w"), "--space", "tiles", "--target", "rocm"]) == 2
    assert "the tiles space has no rule for target kind 'rocm'" in capsys.readouterr().err
    capsys.readouterr()
    module = write(tmp_path, "m.tvms", module_text(16))
    assert main(["opt", "--database", str(tmp_path / "none"), "-p", "MetaScheduleApplyDatabase", module]) == 2
    assert "no tuning database" in capsys.readouterr().err


def test_executor_errors_exit_2(tmp_path, capsys) -> None:
    model = write(tmp_path, "mm.tvms", MATMUL.replace("N", "16"))
    work = str(tmp_path / "w")
    assert main(["tune", model, "--work-dir", work, "--ray-resources", '{"gpu-box": 1}']) == 2
    assert "goes with --executor ray" in capsys.readouterr().err
    assert main(["tune", model, "--work-dir", work, "--executor", "ray", "--ray-resources", "{nope"]) == 2
    assert "JSON object" in capsys.readouterr().err
    assert main(["tune", model, "--work-dir", work, "--executor", "ray", "--ray-resources", '{"x": -1}']) == 2
    assert "positive amounts" in capsys.readouterr().err
    if importlib.util.find_spec("ray") is None:  # without the extra: what to install
        assert main(["tune", model, "--work-dir", work, "--executor", "ray"]) == 2
        assert "tvms[distributed]" in capsys.readouterr().err


def test_a_curve_or_display_that_cannot_work_is_refused_before_tuning(tmp_path, capsys) -> None:
    model = write(tmp_path, "mm.tvms", MATMUL.replace("N", "16"))
    work = tmp_path / "w"
    assert main(["tune", model, "--work-dir", str(work), "--plot", "curve.jpg"]) == 2
    assert ".svg or .png" in capsys.readouterr().err
    assert main(["tune", model, "--work-dir", str(work), "--plot", str(tmp_path / "no" / "c.svg")]) == 2
    assert "folder does not exist" in capsys.readouterr().err
    if importlib.util.find_spec("rich") is None:
        assert main(["tune", model, "--work-dir", str(work), "--progress", "rich"]) == 2
        assert "pip install rich" in capsys.readouterr().err
    assert not work.exists()  # nothing was started


def test_a_space_file_is_interpreted_not_run(tmp_path, capsys) -> None:
    model = write(tmp_path, "mm.tvms", MATMUL.replace("N", "16"))
    marker = tmp_path / "ran"
    evil = write(tmp_path, "space.py", f"import os\nos.system('touch {marker}')\n")
    assert main(["tune", model, "--work-dir", str(tmp_path / "w"), "--space", evil]) == 2
    assert not marker.exists()
    err = capsys.readouterr().err
    assert "space.py:1:1: error:" in err and "^" in err
    wrong_block = write(tmp_path, "space2.py", 'b0 = sch.get_block(name="D", func_name="main")\n')
    assert main(["tune", model, "--work-dir", str(tmp_path / "w"), "--space", wrong_block]) == 1
    assert "space2.py:1:6" in capsys.readouterr().err


SPACE = '''b0 = sch.get_block(name="C", func_name="main")
l1, l2, l3 = sch.get_loops(block=b0)
v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16)
l6, l7 = sch.split(loop=l2, factors=[v4, v5])
sch.reorder(l1, l6, l3, l7)
'''


@pytest.mark.slow
def test_tune_writes_the_tuned_module_and_opt_applies_the_database(tmp_path, capsys) -> None:
    model = write(tmp_path, "m.tvms", module_text(32))
    space = write(tmp_path, "space.py", SPACE)
    work, out, curve = tmp_path / "w", tmp_path / "tuned.tvms", tmp_path / "curve.svg"
    assert main(["tune", model, "--work-dir", str(work), "--trials", "3", "--space", space,
                 "--strategy", "replay-func", "--cost-model", "random", "--progress", "plain",
                 "-o", str(out), "--plot", str(curve)]) == 0
    err = capsys.readouterr().err
    assert "trials 3/3" in err and "Total trials: 3" in err
    tuned = out.read_text()
    assert "for i, j_0 in T.grid(32, " in tuned and '"tir.is_scheduled": True' in tuned
    assert curve.read_text().startswith("<svg")
    assert main(["opt", "--database", str(work), "-p", "MetaScheduleApplyDatabase", model]) == 0
    assert capsys.readouterr().out == tuned
    assert main(["build", str(out), "-o", str(tmp_path / "m.so")]) == 0
    # resuming with the same budget measures nothing more
    assert main(["tune", model, "--work-dir", str(work), "--trials", "3", "--resume", "--space", space,
                 "--strategy", "replay-func", "--cost-model", "random", "--progress", "none"]) == 0
    assert len((work / "database_tuning_record.json").read_text().splitlines()) == 3


def test_ctrl_c_exits_130_saying_how_to_resume(tmp_path, capsys, monkeypatch) -> None:
    def interrupted(*args, **kwargs):
        assert threading.current_thread() is threading.main_thread()  # where Ctrl-C arrives
        raise KeyboardInterrupt

    monkeypatch.setattr(tune, "tune_tir", interrupted)
    model = write(tmp_path, "m.tvms", module_text(16))
    assert main(["tune", model, "--work-dir", str(tmp_path / "w")]) == 130
    assert "interrupted; the database in" in capsys.readouterr().err


LINEAR = """@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 16), dtype="float32"), w: R.Tensor((8, 16), dtype="float32")) -> R.Tensor((1, 8), dtype="float32"):
        with R.dataflow():
            y = R.matmul(x, R.permute_dims(w))
            R.output(y)
        return y
"""


def test_a_relax_module_is_tuned_as_tvms_build_lowers_it(tmp_path, capsys) -> None:
    # the weight transpose is fused into the matmul first, as tvms build does: one kernel to
    # tune, which reads w as stored, not a transpose kernel and a matmul
    model = write(tmp_path, "linear.tvms", LINEAR)
    out, work = tmp_path / "tuned.tvms", tmp_path / "w"
    work.mkdir()  # empty files left by a run that failed before its first trial: nothing to resume
    (work / "database_workload.json").write_text("")
    assert main(["tune", model, "--work-dir", str(work), "--trials", "2", "--strategy", "replay-trace",
                 "--cost-model", "random", "--progress", "none", "-o", str(out)]) == 0
    tuned = out.read_text()
    assert tuned.count("@T.prim_func") == 1 and "transpose" not in tuned
    assert '"tir.is_scheduled": True' in tuned
    import numpy as np

    import tvms

    x, w = np.random.rand(1, 16).astype("float32"), np.random.rand(8, 16).astype("float32")
    vm = tvms.relax.VirtualMachine(tvms.compile(tvms.script.from_source(tuned)), tvms.cpu())
    np.testing.assert_allclose(vm["main"](x, w).numpy(), x @ w.T, rtol=1e-5)


def test_the_tiles_space_adds_the_targets_tile_rule(tmp_path, capsys, monkeypatch) -> None:
    """``--space tiles`` tunes in the target's tile space (a matmul under llvm: TVM's sketches,
    ConvRegisterTile having no conv to branch)."""
    from tvms.lowering.tune import tile_space as spaces

    made, real = [], spaces.tile_space
    monkeypatch.setattr(spaces, "tile_space", lambda target: made.append(real(target)) or made[-1])
    model = write(tmp_path, "mm.tvms", MATMUL.replace("N", "16"))
    assert main(["tune", model, "--work-dir", str(tmp_path / "w"), "--trials", "2", "--space", "tiles",
                 "--strategy", "replay-trace", "--cost-model", "random", "--progress", "none",
                 "--pass-config", "tirx.disable_cse_tir=1", "--pass-config", 'tirx.UnrollLoop={"auto_max_step": 8}']) == 0
    assert [type(space.sch_rules[1]).__name__ for space in made] == ["ConvRegisterTile"]
    out, err = capsys.readouterr()
    assert '"tir.is_scheduled": True' in out
    # (the builder's workers built under these options: test_tune_core's pass-context test)
    assert ("tvms: note: the candidates were built under --pass-config tirx.disable_cse_tir=true "
            "--pass-config 'tirx.UnrollLoop={\"auto_max_step\":8}'; build the result with the same") in err


def test_tuning_that_measures_nothing_fails(tmp_path, capsys, monkeypatch) -> None:
    """Exit 1, nothing written: cuda candidates with no GPU here to run them (refused before any
    build), and a run where no function had a successful trial."""
    from tvms.lowering.tune import tune as tuning
    from tvms.lowering.tune.database import MemoryDatabase
    from tvms.runtime import cuda_driver

    model = write(tmp_path, "mm.tvms", MATMUL.replace("N", "16"))
    out = tmp_path / "out.tvms"
    if cuda_driver.cuda_device_count() == 0:
        cuda = "cuda -arch=sm_90 -max_threads_per_block=1024 -max_shared_memory_per_block=49152"
        assert main(["tune", model, "--work-dir", str(tmp_path / "w"), "--target", cuda, "-o", str(out)]) == 1
        assert "the local runner measures cuda candidates on this machine's GPU, and it has none" \
            in capsys.readouterr().err
        assert not out.exists()
    monkeypatch.setattr(tuning, "tune_tir", lambda *args, **kwargs: MemoryDatabase())
    assert main(["tune", model, "--work-dir", str(tmp_path / "w2"), "-o", str(out)]) == 1
    assert "no trial succeeded, for any function (main)" in capsys.readouterr().err
    assert not out.exists()

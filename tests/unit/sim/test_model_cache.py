"""The shipped code model's on-disk cache (``sim.model_cache``): a stored fit is the same
model, a changed package is a new key, a bad file is refitted, concurrent processes fit once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dagster_project.settings import cache_dir
from dagster_project.sim import codemodel, model_cache
from dagster_project.sim.codemodel import CodeModel

ROOT = Path(__file__).resolve().parents[3]


def small_model(seed: int = 0, ridge: bool = False) -> CodeModel:
    """A real fit (``fit_code``) on 80 random kernels of 4 ops, a few rungs each."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(80, len(codemodel.FEATURES)))
    y = x[:, 0] * 0.7 - x[:, 3] * 0.2 + rng.normal(scale=0.1, size=80)
    keys = [(f"op{i % 4}", "cuda" if i % 3 else "triton", f"v{i % 5}") for i in range(80)]
    model = codemodel.fit_code(x, y, [k[0] for k in keys], keys)
    if ridge:
        model = CodeModel(codemodel.fit(x, y, 1.0), model.offsets)
    return model


def _predict(model: CodeModel, seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(30, len(codemodel.FEATURES)))
    keys = [(f"op{i % 5}", "cuda", f"v{i % 6}") for i in range(30)]
    return model.predict_kernels(x, keys)


@pytest.mark.parametrize("ridge", [False, True])
def test_a_stored_model_is_the_same_model(ridge: bool) -> None:
    model = small_model(ridge=ridge)
    back = codemodel.model_from_data(json.loads(json.dumps(codemodel.model_to_data(model))))
    assert back == model
    assert _predict(back) == _predict(model)  # bit for bit, not approximately


def test_malformed_data_is_refused() -> None:
    data = codemodel.model_to_data(small_model())
    for broken in (
        {**data, "learner": {**data["learner"], "kind": "forest"}},
        {**data, "learner": {**data["learner"], "trees": [[1, 0.5, 0.1]]}},
        {**data, "learner": {**data["learner"], "trees": [0.3]}},
        {"learner": data["learner"]},
    ):
        with pytest.raises((KeyError, TypeError, ValueError)):
            codemodel.model_from_data(broken)


class Fits:
    """A fit function that counts its calls."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> CodeModel:
        self.n += 1
        return small_model()


def test_the_second_call_reads_the_first_fit(tmp_path: Path) -> None:
    fit = Fits()
    first = model_cache.cached_code_model(fit, folder=tmp_path, key="k1")
    assert fit.n == 1 and (tmp_path / "k1.json").is_file()
    again = model_cache.cached_code_model(fit, folder=tmp_path, key="k1")
    assert fit.n == 1 and again == first
    model_cache.cached_code_model(fit, folder=tmp_path, key="k2")  # another package content
    assert fit.n == 2


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"key": "other", "model": {}}),
        json.dumps({"key": "k1", "model": {"learner": {"kind": "boosted"}}}),
        "",
    ],
)
def test_a_bad_cache_file_is_refitted_and_replaced(tmp_path: Path, content: str) -> None:
    (tmp_path / "k1.json").write_text(content)
    fit = Fits()
    model = model_cache.cached_code_model(fit, folder=tmp_path, key="k1")
    assert fit.n == 1 and model == small_model()
    assert json.loads((tmp_path / "k1.json").read_text())["key"] == "k1"
    model_cache.cached_code_model(fit, folder=tmp_path, key="k1")
    assert fit.n == 1


def test_an_unwritable_cache_costs_only_the_fit(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    fit = Fits()
    assert (
        model_cache.cached_code_model(fit, folder=blocker / "codemodel", key="k") == small_model()
    )
    assert fit.n == 1


def test_old_fits_are_pruned(tmp_path: Path) -> None:
    for i in range(10):
        p = tmp_path / f"old{i}.json"
        p.write_text("{}")
        (tmp_path / f"old{i}.lock").write_text("")
        os.utime(p, (1000 + i, 1000 + i))
    model_cache.cached_code_model(Fits(), folder=tmp_path, key="new")
    kept = sorted(p.stem for p in tmp_path.glob("*.json"))
    assert len(kept) == model_cache.KEEP and "new" in kept
    assert {f"old{i}" for i in range(5, 10)} == set(kept) - {"new"}  # the newest
    assert not (tmp_path / "old0.lock").exists()


def test_the_key_follows_every_file_but_compiled_ones(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "templates" / "k.cu.j2").write_text("__global__ void k() {}\n")
    base = model_cache.content_key(tmp_path)
    assert model_cache.content_key(tmp_path) == base
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0\1")
    assert model_cache.content_key(tmp_path) == base
    (tmp_path / "templates" / "k.cu.j2").write_text("__global__ void k() { }\n")
    changed = model_cache.content_key(tmp_path)
    assert changed != base
    (tmp_path / "templates" / "k.cu.j2").rename(tmp_path / "templates" / "k2.cu.j2")
    assert model_cache.content_key(tmp_path) not in (base, changed)


def test_the_package_key_covers_the_shipped_answers() -> None:
    files = {
        p.relative_to(model_cache.SIM_ROOT).as_posix() for p in model_cache.SIM_ROOT.rglob("*.csv")
    }
    assert "data/measured/h100_answers.csv" in files
    assert "data/measured/h200_online_answers.csv" in files


_CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from dagster_project.sim import model_cache
from tests.unit.sim.test_model_cache import small_model

def fit():
    with open({log!r}, "a") as fh:
        fh.write("fit\\n")
    time.sleep(1.0)
    return small_model()

m = model_cache.cached_code_model(fit, folder=Path({folder!r}), key="shared")
print(m == small_model())
"""


def test_concurrent_processes_fit_once(tmp_path: Path) -> None:
    log = tmp_path / "fits.log"
    code = _CHILD.format(root=str(ROOT), log=str(log), folder=str(tmp_path / "cache"))
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    t0 = time.time()
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert outs == ["True"] * 3
    assert log.read_text().count("fit") == 1, f"fitted {log.read_text().count('fit')} times"
    assert time.time() - t0 < 120


def test_cache_dir_precedence(tmp_path: Path) -> None:
    assert cache_dir({"KERNELHOUSE_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "kernelhouse"
    assert cache_dir({"KERNELHOUSE_CACHE_DIR": " ", "XDG_CACHE_HOME": str(tmp_path)}) == (
        tmp_path / "kernelhouse"
    )
    assert cache_dir({}) == Path.home() / ".cache" / "kernelhouse"


def test_an_extra_file_is_part_of_the_key(tmp_path: Path) -> None:
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "a.py").write_text("x = 1\n")
    gpus = tmp_path / "gpus.py"
    gpus.write_text("NAMES = {}\n")
    base = model_cache.content_key(tmp_path / "sim", (gpus,))
    assert base != model_cache.content_key(tmp_path / "sim")
    gpus.write_text("NAMES = {'h100': 'NVIDIA H100'}\n")
    assert model_cache.content_key(tmp_path / "sim", (gpus,)) != base


def test_no_home_directory_costs_only_the_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where ``Path.home()`` fails (no HOME, no passwd entry) still builds: the
    model is fitted once, uncached, with a warning, instead of the build failing."""
    for var in ("KERNELHOUSE_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    fit = Fits()
    assert model_cache.cached_code_model(fit, key="k") == small_model()
    assert fit.n == 1

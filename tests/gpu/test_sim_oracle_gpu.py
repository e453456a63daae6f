"""The measurement oracle on a real GPU (issue 36; runs only on the device).

Renders three kernels the simulator writes (a CUDA RMSNorm, a Triton RMSNorm, and the CUDA
wgmma GEMM with a 2-CTA cluster that the shipped answers say never completes correctly),
asks ``benchmarks/device/sim_oracle.py run`` about them and checks its answers: the two
RMSNorms compile, match the fp32 reference and get a device time with a spread; the
clustered GEMM is not ok."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # pragma: no cover - CPU machines
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]


def _case(out: Path, i: int, op: str, impl: str, tag: str, dtype: str, shape: dict, p: dict):
    sys.path.insert(0, str(ROOT))
    from dagster_project.sim.codegen import render_candidate
    from dagster_project.sim.hardware import get_gpu
    from dagster_project.sim.ops import get_op
    from dagster_project.sim.oracle import answer_key
    from dagster_project.sim.variants import default_params, get_variant

    o = get_op(op)
    v = get_variant(o.family, impl, tag)
    params = {**default_params(v, o, dtype, shape, get_gpu("h100")), **p}
    code = render_candidate(o, get_gpu("h100"), dtype, shape, v, params)
    rel = f"src/{i:05d}_{op}.{'cu' if impl == 'cuda' else 'py'}"
    (out / rel).write_text(code)
    return {
        "id": i,
        "key": answer_key(code, shape, dtype, "h100"),
        "op": op,
        "impl": impl,
        "variant": tag,
        "params": params,
        "dtype": dtype,
        "shape": shape,
        "file": rel,
        "gpu": "h100",
        "role": "test",
        "session_id": "test",
        "step": i,
        "uses": [["test", i, "test"]],
    }


def test_oracle_answers_on_the_device(tmp_path: Path) -> None:
    src = tmp_path / "src_root"
    (src / "src").mkdir(parents=True)
    cases = [
        _case(src, 0, "rmsnorm", "cuda", "v2_warp_shuffle", "bf16", {"T": 64, "H": 4096}, {}),
        _case(src, 1, "rmsnorm", "triton", "v1_block", "bf16", {"T": 64, "H": 4096}, {}),
        _case(
            src,
            2,
            "gemm_fp16",
            "cuda",
            "v4_wgmma_tma",
            "fp16",
            {"M": 512, "N": 4096, "K": 1024},
            {"BM": 128, "BN": 128, "stages": 3, "cluster_m": 2},
        ),
    ]
    (src / "manifest.json").write_text(json.dumps(cases))
    out = tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "benchmarks/device/sim_oracle.py"), "run"]
    cmd += ["--src", str(src), "--out", str(out), "--budget", "90", "--case-timeout", "20"]
    subprocess.run(cmd, check=True, timeout=240, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    verdicts = {
        json.loads(ln)["id"]: json.loads(ln)
        for ln in (out / "verify.jsonl").read_text().splitlines()
    }
    timed = {
        json.loads(ln)["id"]: json.loads(ln)
        for ln in (out / "timing.jsonl").read_text().splitlines()
    }
    for i in (0, 1):
        assert verdicts[i]["status"] == "ok", verdicts[i]
        assert timed[i]["ms"] > 0 and timed[i]["spread_pct"] >= 0
    assert verdicts[2]["status"] != "ok"
    stamps = json.loads((out / "stamps.json").read_text())
    assert stamps["device"] and stamps["torch"] and stamps["triton"]

"""kernel_commits medians and tuned_configs speedup_vs_default attribution."""

from __future__ import annotations

import pytest

from dagster_project.gains.attribution import (
    attribute_config_row,
    config_speedup_vs_default,
    kernel_commit_speedups,
)
from dagster_project.gains.mentions import canonical_gpu, gpu_matches
from dagster_project.gains.schema import Measurement


def k(
    bs: int, speedup: float, hw: str | None = "H100", shape: str | None = "E=8, N=14336"
) -> Measurement:
    return Measurement(
        scope="kernel",
        metric="latency",
        batch_size=bs,
        speedup=speedup,
        hardware=hw,
        shape=shape,
        audit_pass=True,
    )


ROW = {"device_name": "NVIDIA_H100_80GB_HBM3", "E": 8, "N": 14336, "M": 64}


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("H100", "NVIDIA_H100_80GB_HBM3", True),
        ("8xH100", "NVIDIA_H100_80GB_HBM3", True),
        ("H100 SXM", "NVIDIA_H100_80GB_HBM3", True),
        ("H100 PCIe", "NVIDIA_H100_80GB_HBM3", False),
        ("H100", "NVIDIA_H100_PCIe", True),
        ("H200", "NVIDIA_H200", True),
        ("H20", "NVIDIA_H200", False),
        ("A100-80G", "NVIDIA_A100-SXM4-80GB", True),
        ("A100 40GB", "NVIDIA_A100-SXM4-80GB", False),
        ("MI300X", "AMD_Instinct_MI300X", True),
        ("B200", "NVIDIA_GB200", False),
        ("RTX 4090", "NVIDIA_GeForce_RTX_4090", True),
        (None, "NVIDIA_H100_80GB_HBM3", False),
    ],
)
def test_gpu_name_matching(a: str | None, b: str, expected: bool) -> None:
    assert gpu_matches(a, b) is expected


def test_canonical_gpu_ignores_names_that_are_not_gpus() -> None:
    assert canonical_gpu("W4A16") is None and canonical_gpu("Mixtral-8x7B") is None


def test_kernel_commit_medians_per_scope() -> None:
    gains = [
        k(1, 1.1),
        k(2, 1.5),
        k(4, 3.0),
        Measurement(scope="e2e", metric="x", stated_speedup=1.2, audit_pass=True),
    ]
    assert kernel_commit_speedups(gains) == {"kernel_speedup": 1.5, "e2e_speedup": 1.2}


def test_audit_failed_or_unaudited_measurements_never_feed_speedups() -> None:
    failed = k(64, 9.0)
    failed.audit_pass = False
    unaudited = Measurement(scope="e2e", metric="x", stated_speedup=7.0)
    assert kernel_commit_speedups([failed, unaudited]) == {
        "kernel_speedup": None,
        "e2e_speedup": None,
    }
    assert kernel_commit_speedups([failed, k(64, 1.2)])["kernel_speedup"] == 1.2
    assert config_speedup_vs_default(ROW, [failed]).speedup_vs_default is None
    out = attribute_config_row(ROW, [failed, k(64, 1.2)])
    # kept in config_pr_gains (with its flags), never in speedup_vs_default
    assert out["speedup_vs_default"] == 1.2 and len(out["config_pr_gains"]) == 2
    assert kernel_commit_speedups([]) == {"kernel_speedup": None, "e2e_speedup": None}
    gains = [k(1, 1.1), k(2, 1.5), k(4, 3.0)]
    assert kernel_commit_speedups([g.to_row() for g in gains])["kernel_speedup"] == 1.5


def test_single_matching_measurement_is_used() -> None:
    att = config_speedup_vs_default(ROW, [k(64, 1.3), k(128, 2.0)])
    assert att.speedup_vs_default == 1.3 and len(att.matched) == 1


def test_agreeing_matches_give_the_median_and_disagreeing_give_none() -> None:
    assert (
        config_speedup_vs_default(ROW, [k(64, 1.30), k(64, 1.34), k(64, 1.32)]).speedup_vs_default
        == 1.32
    )
    att = config_speedup_vs_default(ROW, [k(64, 1.30), k(64, 1.50)])
    assert att.speedup_vs_default is None and "disagree" in att.reason


@pytest.mark.parametrize(
    "m",
    [
        k(32, 1.3),  # batch size differs from M
        k(64, 1.3, hw="H100 PCIe"),  # different form factor
        k(64, 1.3, hw="A100"),  # different GPU
        k(64, 1.3, shape="E=16, N=14336"),  # shape conflict
        k(64, 1.3, hw=None),  # GPU unknown
        k(64, 1.3, shape=None),  # shape unknown
        Measurement(
            scope="e2e",
            metric="x",
            batch_size=64,
            speedup=1.3,
            hardware="H100",
            shape="E=8, N=14336",
        ),
    ],
)
def test_ambiguous_or_mismatched_measurements_are_not_attributed(m: Measurement) -> None:
    assert config_speedup_vs_default(ROW, [m]).speedup_vs_default is None


def test_implied_by_pr_fills_unstated_gpu_and_shape_but_not_conflicts() -> None:
    assert (
        config_speedup_vs_default(
            ROW, [k(64, 1.3, hw=None, shape=None)], implied_by_pr=True
        ).speedup_vs_default
        == 1.3
    )
    assert (
        config_speedup_vs_default(
            ROW, [k(64, 1.3, hw="A100", shape=None)], implied_by_pr=True
        ).speedup_vs_default
        is None
    )


def test_row_from_config_file_name() -> None:
    row = {"config_file": "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", "M": 64}
    out = attribute_config_row(row, [k(64, 1.3), k(1, 1.1)])
    assert out["speedup_vs_default"] == 1.3 and len(out["config_pr_gains"]) == 2
    assert set(out["config_pr_gains"][0]) == {
        "scope",
        "hardware",
        "model",
        "shape",
        "batch_size",
        "metric",
        "unit",
        "higher_is_better",
        "baseline",
        "optimized",
        "stated_speedup",
        "speedup",
    }

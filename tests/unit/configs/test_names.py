"""The file-name grammar: every quirk seen in vLLM/SGLang history, one row each."""

from __future__ import annotations

import pytest

from dagster_project.mining.configs.names import (
    ConfigNameError,
    has_low_shared_memory,
    is_blackwell_datacenter,
    normalise_gpu,
    normalised_basename,
    parse_config_name,
)

# (file name, expected fields). Fields not listed take the ParsedName defaults.
GRAMMAR = [
    # plain bf16/fp16 MoE: no dtype
    (
        "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
        {
            "family": "moe",
            "E": 8,
            "N": 14336,
            "device_name": "NVIDIA_H100_80GB_HBM3",
            "dtype": None,
        },
    ),
    ("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json", {"dtype": "fp8_w8a8"}),
    # vLLM writes the block shape without a space, SGLang with one
    (
        "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json",
        {"block_shape": (128, 128), "dtype": "fp8_w8a8"},
    ),
    (
        "E=257,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json",
        {"E": 257, "block_shape": (128, 128)},
    ),
    # block shape without a dtype
    (
        "E=256,N=1024,device_name=AMD_Instinct_MI325X,block_shape=[128,128].json",
        {"dtype": None, "block_shape": (128, 128), "device_name": "AMD_Instinct_MI325X"},
    ),
    (
        "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,per_channel_quant=True.json",
        {"per_channel_quant": True, "dtype": "fp8_w8a8"},
    ),
    # _down wherever the last field ends
    (
        "E=384,N=128,device_name=,dtype=int4_w4a16_down.json",
        {"is_down": True, "dtype": "int4_w4a16", "device_name": ""},
    ),
    (
        "E=257,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128, 128]_down.json",
        {"is_down": True, "block_shape": (128, 128), "device_name": "NVIDIA_B200"},
    ),
    (
        "E=160,N=192,device_name=NVIDIA_H20_down.json",
        {"is_down": True, "device_name": "NVIDIA_H20", "dtype": None},
    ),
    (
        "E=8,N=8192,device_name=NVIDIA_H20,dtype=fp8_w8a8,per_channel_quant=True_down.json",
        {"is_down": True, "per_channel_quant": True},
    ),
    # empty device name
    (
        "E=384,N=128,device_name=,dtype=int4_w4a16.json",
        {"device_name": "", "dtype": "int4_w4a16", "is_down": False},
    ),
    # exotic device names: parentheses, brackets, dashes, dots
    (
        "E=16,N=1792,device_name=Intel(R)_Arc(TM)_Pro_B60_Graphics.json",
        {"device_name": "Intel(R)_Arc(TM)_Pro_B60_Graphics"},
    ),
    (
        "N=2048,K=7168,device_name=Intel(R)_Graphics_[0xe223],dtype=fp8_w8a8,"
        "block_shape=[128,128].json",
        {"family": "block_fp8", "device_name": "Intel(R)_Graphics_[0xe223]", "N": 2048, "K": 7168},
    ),
    (
        "E=161,N=384,device_name=NVIDIA_H20-3e,dtype=int8_w8a16.json",
        {"device_name": "NVIDIA_H20-3e", "dtype": "int8_w8a16"},
    ),
    (
        "E=64,N=640,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Max-Q_Workstation_Edition.json",
        {"device_name": "NVIDIA_RTX_PRO_6000_Blackwell_Max-Q_Workstation_Edition"},
    ),
    # legacy dtypes (dead at runtime, still parsed)
    ("E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3,dtype=float8.json", {"dtype": "float8"}),
    ("E=64,N=8960,device_name=NVIDIA_H100_80GB_HBM3,dtype=bf16.json", {"dtype": "bf16"}),
    ("E=1,N=1792,device_name=NVIDIA_A100-SXM4-80GB,dtype=int8_w8a16.json", {"E": 1}),
    # block matmul, fp8 and int8
    (
        "N=1536,K=7168,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,"
        "block_shape=[128, 128].json",
        {"family": "block_fp8", "N": 1536, "K": 7168, "E": None},
    ),
    (
        "N=1536,K=1536,device_name=NVIDIA_A100-SXM4-80GB,dtype=int8_w8a8,block_shape=[128,128].json",
        {"family": "block_int8", "dtype": "int8_w8a8"},
    ),
    # the newer upstream per-token grammar: no block shape, extra dtype fields
    (
        "N=15360,K=3840,device_name=AMD_Radeon_R9700,dtype=fp8_w8a8_per_token,"
        "input_dtype=float8_e4m3fn,out_dtype=bfloat16.json",
        {
            "family": "block_fp8",
            "block_shape": None,
            "input_dtype": "float8_e4m3fn",
            "out_dtype": "bfloat16",
            "dtype": "fp8_w8a8_per_token",
        },
    ),
    # selective state update
    (
        "headdim=64,dstate=128,device_name=NVIDIA_H100_80GB_HBM3,cache_dtype=float16.json",
        {"family": "ssu", "headdim": 64, "dstate": 128, "cache_dtype": "float16", "E": None},
    ),
    (
        "headdim=64,dstate=128,device_name=Intel(R)_Arc(TM)_Pro_B70_Graphics,cache_dtype=float32.json",
        {"family": "ssu", "device_name": "Intel(R)_Arc(TM)_Pro_B70_Graphics"},
    ),
]


@pytest.mark.parametrize(("name", "expected"), GRAMMAR, ids=[g[0][:60] for g in GRAMMAR])
def test_grammar(name: str, expected: dict) -> None:
    parsed = parse_config_name(name)
    for key, value in expected.items():
        assert getattr(parsed, key) == value, key
    assert parsed.known_dtype


def test_path_prefix_is_ignored() -> None:
    p = parse_config_name("python/x/configs/triton_3_1_0/E=8,N=7168,device_name=NVIDIA_L20.json")
    assert (p.E, p.N, p.device_name) == (8, 7168, "NVIDIA_L20")


BAD = [
    ("README.md", "not a .json file"),
    ("causal_conv1d_fwd_sm_90.json", "none of E=, N=, headdim="),
    ("lora_shrink,K=4096,R=64,device=NVIDIA_H200.json", "none of E=, N=, headdim="),
    ("E=16,device_name=NVIDIA_L40S.json", "MoE name does not match"),
    (
        "E=16,N=800,device_name=NVIDIA_L40S,dtype=fp8_w8a8,block_shape=[128].json",
        "malformed fields after device_name",
    ),
    ("E=16,N=800,device_name=NVIDIA_L40S,input_dtype=fp8.json", "malformed fields"),
    ("N=1536,K=7168,device_name=NVIDIA_H100.json", "block-matmul name does not match"),
    ("headdim=64,dstate=128,device_name=NVIDIA_B200.json", "SSU name does not match"),
]


@pytest.mark.parametrize(("name", "reason"), BAD, ids=[b[0][:50] for b in BAD])
def test_bad_names_raise_with_reason(name: str, reason: str) -> None:
    with pytest.raises(ConfigNameError) as err:
        parse_config_name(name)
    assert reason in err.value.reason


def test_never_splits_on_commas_inside_device() -> None:
    # A comma inside the device is kept as long as no known key follows it.
    p = parse_config_name("E=8,N=64,device_name=Vendor,Model_X,dtype=fp8_w8a8.json")
    assert p.device_name == "Vendor,Model_X" and p.dtype == "fp8_w8a8"


def test_unknown_dtype_parses_but_is_flagged() -> None:
    p = parse_config_name("E=8,N=64,device_name=NVIDIA_B200,dtype=mxfp4.json")
    assert p.dtype == "mxfp4" and not p.known_dtype


GPUS = [
    ("NVIDIA_H100_80GB_HBM3", "NVIDIA", "H100"),
    ("NVIDIA_H100", "NVIDIA", "H100"),
    ("NVIDIA_H100_PCIe", "NVIDIA", "H100 PCIe"),
    ("NVIDIA_A100-SXM4-80GB", "NVIDIA", "A100"),
    ("NVIDIA_A100-SXM4-40GB", "NVIDIA", "A100"),
    ("NVIDIA_H20-3e", "NVIDIA", "H20-3e"),
    ("NVIDIA_B300_SXM6_AC", "NVIDIA", "B300"),
    ("NVIDIA_GeForce_RTX_4090", "NVIDIA", "GeForce RTX 4090"),
    (
        "NVIDIA_RTX_PRO_6000_Blackwell_Max-Q_Workstation_Edition",
        "NVIDIA",
        "RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    ),
    ("AMD_Instinct_MI300X", "AMD", "MI300X"),
    ("AMD_Instinct_MI325_OAM", "AMD", "MI325X"),
    ("AMD_Instinct_MI355_OAM", "AMD", "MI355X"),
    ("AMD_Instinct_MI300XHF_OAM", "AMD", "MI300XHF"),
    ("MI308X", "AMD", "MI308X"),
    ("AMD_Radeon_Graphics", "AMD", "Radeon Graphics"),
    ("Radeon_8060S_Graphics", "AMD", "Radeon 8060S"),
    ("AMD_Radeon_8060S", "AMD", "Radeon 8060S"),
    ("Intel(R)_Arc(TM)_Pro_B60_Graphics", "Intel", "Arc Pro B60"),
    ("Intel(R)_Graphics_[0xe223]", "Intel", "Graphics [0xe223]"),
]


@pytest.mark.parametrize(("device", "vendor", "model"), GPUS)
def test_gpu_normalisation(device: str, vendor: str, model: str) -> None:
    gpu = normalise_gpu(device)
    assert (gpu.vendor, gpu.model) == (vendor, model)
    assert gpu.label == f"{vendor} {model}"


def test_empty_device_is_unknown_gpu() -> None:
    gpu = normalise_gpu("")
    assert gpu.vendor is None and gpu.model is None and gpu.label is None


def test_platform_classes() -> None:
    assert is_blackwell_datacenter("B200") and is_blackwell_datacenter("GB200")
    assert not is_blackwell_datacenter("RTX PRO 6000 Blackwell Server Edition")
    assert has_low_shared_memory("NVIDIA", "L40S")
    assert has_low_shared_memory("NVIDIA", "GeForce RTX 4090")
    assert not has_low_shared_memory("NVIDIA", "H100")
    assert not has_low_shared_memory("AMD", "MI300X")


def test_normalised_basename_removes_spaces_only() -> None:
    assert (
        normalised_basename("a/b/N=1,K=2,device_name=X,dtype=fp8_w8a8,block_shape=[128, 128].json")
        == "N=1,K=2,device_name=X,dtype=fp8_w8a8,block_shape=[128,128].json"
    )

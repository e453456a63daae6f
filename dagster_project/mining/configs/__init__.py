"""The ``tuned_configs`` subset: autotuned Triton launch configs mined from vLLM and SGLang.

Plain, typed domain code over polars frames (no dagster import). The pipeline, one call
per asset:

1. ``discover_config_files``  every tuned-config JSON at a ref, names parsed
2. ``read_config_entries``    one row per (file, M), incremental by blob id
3. ``attribute_config_prs``   the PR that last changed each file's content
4. ``extract_kernel_sources`` the Triton kernel each family drives
5. ``load_model_shapes_snapshot`` / ``refresh_model_shapes``  MoE model shapes
6. ``build_tuned_configs``    the dataset rows (prompt, best_config, split …)
"""

from dagster_project.mining.configs.attribution import (
    ATTRIBUTION_SCHEMA,
    attribute_config_prs,
    pr_number_of,
    verify_attribution,
)
from dagster_project.mining.configs.candidates import candidate_models, match_models
from dagster_project.mining.configs.dataset import TUNED_CONFIGS_SCHEMA, build_tuned_configs
from dagster_project.mining.configs.defaults import default_config, nearest_key
from dagster_project.mining.configs.discover import FILES_SCHEMA, discover_config_files
from dagster_project.mining.configs.entries import (
    BLOB_CACHE,
    ENTRIES_SCHEMA,
    read_config_entries,
)
from dagster_project.mining.configs.kernels import KERNELS_SCHEMA, extract_kernel_sources
from dagster_project.mining.configs.names import (
    ConfigNameError,
    ParsedName,
    normalise_gpu,
    parse_config_name,
)
from dagster_project.mining.configs.prompt import allowed_keys, build_prompt
from dagster_project.mining.configs.shapes import (
    SHAPES_SCHEMA,
    load_model_shapes_snapshot,
    refresh_model_shapes,
)
from dagster_project.mining.configs.specs import CONFIG_DIRS, KERNEL_FILES, kernel_for
from dagster_project.mining.configs.split import apply_deployment_split, deployment_group

__all__ = [
    "ATTRIBUTION_SCHEMA",
    "BLOB_CACHE",
    "CONFIG_DIRS",
    "ENTRIES_SCHEMA",
    "FILES_SCHEMA",
    "KERNELS_SCHEMA",
    "KERNEL_FILES",
    "SHAPES_SCHEMA",
    "TUNED_CONFIGS_SCHEMA",
    "ConfigNameError",
    "ParsedName",
    "allowed_keys",
    "apply_deployment_split",
    "attribute_config_prs",
    "build_prompt",
    "build_tuned_configs",
    "candidate_models",
    "default_config",
    "deployment_group",
    "discover_config_files",
    "extract_kernel_sources",
    "kernel_for",
    "load_model_shapes_snapshot",
    "match_models",
    "nearest_key",
    "normalise_gpu",
    "parse_config_name",
    "pr_number_of",
    "read_config_entries",
    "refresh_model_shapes",
    "verify_attribution",
]

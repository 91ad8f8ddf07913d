"""Each accelerate config loads through accelerate's own config classes and says what its launcher relies on."""

from __future__ import annotations

from pathlib import Path

import pytest
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.utils import ComputeEnvironment, DistributedType

CONFIGS = Path(__file__).resolve().parents[1] / "accelerate_configs"


def load(name: str) -> ClusterConfig:
    config = load_config_from_file(str(CONFIGS / name))
    assert isinstance(config, ClusterConfig)
    assert config.compute_environment == ComputeEnvironment.LOCAL_MACHINE
    assert config.num_machines == 1
    return config


def test_every_config_file_is_covered():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(
        ["cpu.yaml", "single_gpu.yaml", "multi_gpu.yaml", "deepspeed_zero2.yaml", "deepspeed_zero3.yaml"]
    )


def test_cpu_config_spawns_ranks_through_torchrun_on_cpu():
    config = load("cpu.yaml")
    # MULTI_GPU is accelerate's torchrun launcher; use_cpu makes each rank a gloo MULTI_CPU rank (see the file).
    assert config.distributed_type == DistributedType.MULTI_GPU
    assert config.use_cpu is True
    assert config.num_processes == 1
    assert config.mixed_precision == "no"


def test_single_gpu_config():
    config = load("single_gpu.yaml")
    assert config.distributed_type == DistributedType.NO
    assert config.use_cpu is False
    assert config.num_processes == 1
    assert config.mixed_precision == "bf16"


def test_multi_gpu_config():
    config = load("multi_gpu.yaml")
    assert config.distributed_type == DistributedType.MULTI_GPU
    assert config.use_cpu is False
    assert config.num_processes > 1
    assert config.mixed_precision == "bf16"


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_configs(stage):
    config = load(f"deepspeed_zero{stage}.yaml")
    assert config.distributed_type == DistributedType.DEEPSPEED
    assert config.use_cpu is False
    ds = config.deepspeed_config
    assert ds["zero_stage"] == stage
    assert ds["offload_optimizer_device"] == "none" and ds["offload_param_device"] == "none"
    assert ds["zero3_init_flag"] is (stage == 3)
    # Batch sizes and accumulation belong to the recipe; fixing them here breaks `--num_processes` overrides.
    assert "gradient_accumulation_steps" not in ds and "train_batch_size" not in ds
    if stage == 3:
        assert ds["zero3_save_16bit_model"] is True

"""StrictGRPOConfig's own defaults."""

from training.run_setup.config import StrictGRPOConfig


def test_cpu_runs_default_to_fp32_and_explicit_bf16_is_kept(tmp_path):
    # TRL would turn bf16 autocast on here: the trainer's log-probs then drift ~1e-3 from the fp32 sampler's.
    assert StrictGRPOConfig(output_dir=str(tmp_path), use_cpu=True).bf16 is False
    assert StrictGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=True).bf16 is True

"""Held-out evaluation of the trainer's current policy: reward functions on held-out prompts, or goal success of
episodes in the environment for tool agents.

`heldout/reward` is sampled as in training (the training temperature, top-p and top-k, from a fixed seed, so that
evaluations before and after are paired): the policy's expected reward, what GRPO optimises.
`heldout/greedy_reward` is logged beside it; tool runs add `heldout/malformed_calls`.
"""

from __future__ import annotations

from training.distributed import full_weights_for_generation
from training.envs.evaluation import environment_success
from training.evaluation import heldout_reward


class HeldoutEvaluation:
    """Scores `rows` with the trainer's policy; `history` keeps every evaluation with its optimizer step."""

    def __init__(self, trainer, rows: list[dict]):
        self.trainer = trainer
        self.rows = rows
        self.history: list[dict] = []

    def evaluate(self) -> dict[str, float]:
        trainer = self.trainer
        if trainer.environment_factories is not None:
            return self._environment_success()
        rows = self.rows[: trainer.args.heldout_max_samples]
        model = trainer.accelerator.unwrap_model(trainer.model)
        common = dict(
            reward_weights=trainer.reward_weights.tolist(),
            template_kwargs=trainer.chat_template_kwargs,
            max_new_tokens=trainer.max_completion_length,
        )
        sampling = {"temperature": trainer.temperature, "top_p": trainer.top_p, "top_k": trainer.top_k}
        tokenizer, funcs = trainer.processing_class, trainer.reward_funcs
        with full_weights_for_generation(model, trainer.accelerator):
            return {
                "heldout/reward": heldout_reward(
                    model, tokenizer, rows, funcs, **common, sampling=sampling,
                    num_samples=trainer.args.heldout_samples_per_prompt, seed=trainer.args.seed,
                ),
                "heldout/greedy_reward": heldout_reward(model, tokenizer, rows, funcs, **common),
            }

    def record(self) -> dict[str, float]:
        """Evaluate now; the values join the history and the trainer's next log."""
        values = self.evaluate()
        self.history.append({"step": self.trainer.state.global_step, **values})
        for name, value in values.items():
            self.trainer._metrics["train"][name].append(value)
        return values

    def _environment_success(self) -> dict[str, float]:
        """Goal success of sampled and greedy episodes, and the malformed tool calls of both (counted as in
        training)."""
        trainer = self.trainer
        if trainer._multi_environment:
            raise NotImplementedError("held-out evaluation supports a single environment_factory, not a dict")
        common = dict(
            model=trainer.accelerator.unwrap_model(trainer.model),
            tokenizer=trainer.processing_class,
            rows=self.rows[: trainer.args.heldout_max_samples],
            env_factory=trainer.environment_factories[None],
            chat_template=trainer.chat_template,
            template_kwargs=trainer.chat_template_kwargs,
            max_new_tokens=trainer.max_completion_length,
            max_turns=min(trainer.max_tool_calling_iterations, trainer.args.max_tool_calls_per_episode) + 1,
            max_tool_calls=trainer.args.max_tool_calls_per_episode,
        )
        sampled, counts = environment_success(
            **common,
            sampling={"temperature": trainer.temperature, "top_p": trainer.top_p, "top_k": trainer.top_k},
            num_samples=trainer.args.heldout_samples_per_prompt,
            seed=trainer.args.seed,
        )
        greedy, greedy_counts = environment_success(**common)
        malformed = float(sum((counts + greedy_counts).values()))
        return {"heldout/reward": sampled, "heldout/greedy_reward": greedy, "heldout/malformed_calls": malformed}

"""Which sampled tokens carry a step's policy gradient.

For a sampled token y of probability p and advantage A, the gradient of A log p(y) with respect to the logits,
A (onehot(y) - softmax), has L1 norm 2 |A| (1 - p): a near-certain token carries almost none of the step, a token
drawn from the tail up to 2 |A|. A policy that is near-deterministic almost everywhere (the causal starting policy)
puts most of a step's weight on its few uncertain or rare tokens; if one rollout carried most of it, Adam (which moves
every parameter by about the learning rate whatever the gradient's size) would turn that one sample into a full-size
step in its direction. docs/results/causal.md §3.1 reports what these showed around the CBO gradient jumps.

Metrics, over the tokens the loss trains on (`loss_mask`: no tool results, no forced rows), with p the sampling-time
probability:
`advantages/gradient_weight_positive` (the share of sum 2 |A| (1 - p) on tokens with A > 0: pushed up) and
`advantages/gradient_weight_top_rollout` (the largest share one rollout carries).
"""

from __future__ import annotations

from training.algorithms.trajectory import loss_mask


def log_gradient_weight(batch: dict, accelerator, metrics: dict) -> None:
    """Log the two shares (module docstring) of a scored generation batch; nothing without sample-time log-probs."""
    logps = batch.get("sampling_per_token_logps")
    if logps is None:
        return
    mask = loss_mask(batch)
    adv = batch["advantages"]
    adv = adv.unsqueeze(1).expand_as(logps) if adv.dim() == 1 else adv
    weight = adv.abs() * (1 - logps.exp()) * mask  # the factor 2 cancels in the shares
    per_rollout = accelerator.gather(weight.sum(dim=1))
    positive = accelerator.gather((weight * (adv > 0)).sum().reshape(1)).sum()
    total = per_rollout.sum()
    if total <= 0:
        return  # no advantage anywhere: the zero-std and zero-loss checks say so
    metrics["advantages/gradient_weight_positive"].append(float(positive / total))
    metrics["advantages/gradient_weight_top_rollout"].append(float(per_rollout.max() / total))

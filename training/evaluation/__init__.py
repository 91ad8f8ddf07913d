"""Evaluation: the episode record, held-out evaluation during training, the task registry."""

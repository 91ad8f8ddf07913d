"""Tool-use environments plugged into TRL's `environment_factory`, and the trainer features around tool calls."""

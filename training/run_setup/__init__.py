"""Recipe and run setup: the config, strict flags, models, prompt datasets, input checks, the warm start."""

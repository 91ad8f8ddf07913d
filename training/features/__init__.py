"""The strict stack's features: one plain object per file, each holding its own state, called by the step in
`training/trainer.py` in written order. None of them overrides a TRL method."""

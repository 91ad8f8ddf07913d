"""The larger-number task: its splits and rule verifiers."""

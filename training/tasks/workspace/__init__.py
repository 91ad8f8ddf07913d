"""The workspace task: its splits, environment and shaping reward."""

"""What a run leaves behind: atomic writes, checkpoints, the run record and summary, tracking, the hub."""

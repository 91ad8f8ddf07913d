"""Surrogates: beliefs about the target's parents that every new sample updates."""

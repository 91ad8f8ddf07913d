"""Group judges: score all completions of one prompt together, plugged into TRL as reward functions.

`protocol` (what a judge is), `grouping` (pure regrouping of a flat, process-split batch), `adapter` (a judge as a
TRL reward function, with retries, timeouts, NaN on failure and `judge/*` metrics), the judges themselves
(`verifiers`, `embedding`, `reward_model`, `llm`), and `factories` (the names a recipe's `reward_funcs` can use).
"""

"""Algorithm maths as pure functions: advantages, value, the batch schema, sampled log-probs."""

"""Around the step: callbacks, timing probes, health detectors, the metric-name contract, plain TRL."""

"""The causal task: SCMs (`scm/`), surrogates over the target's parents (`surrogates/`), the intervention environment,
baselines.

Library choices (why these and not others):

* networkx (already a dependency of torch): graph generation (Erdős–Rényi G(n, p)), acyclicity checks, topological
  orders. Maintained, pure Python, fast enough for graphs of at most 10 nodes.
* gadjid (MPL-2.0, Rust core in a ~0.4 MB wheel, needs only numpy; Henckel, Würtzen & Weichwald, UAI 2024): SHD,
  plus the parent/ancestor adjustment identification distances for later structure reports. One release so far
  (0.1.0), pinned to its minor series.
* Sampling under interventions is our own ancestral sampler (`scm/scm.py`, ~20 lines). sempler, the closest fit, needs
  pandas, samples linear SCMs through the joint covariance with a zero-variance "do", does not check intervention
  bounds, and its nonlinear sampler seeds numpy's global RNG (no `Generator`); pgmpy, causal-learn and gcastle pull in
  pandas / scikit-learn / torch-sized trees (gcastle is unmaintained) for features we would not use, and none checks
  bounded intervention values. Parent precision / recall / F1 are set arithmetic (`structure_metrics.py`).
* The exact posterior (g-prior local scores and the Koivisto-Sood DP) is ours: no maintained Python package computes
  exact parent-set posteriors over DAGs from mixed observational and interventional data.
"""

"""Scripted policies in the intervention environment: the baselines that bound the score scale of every later report,
and the starting policy's teacher.

A policy maps the episode so far (the environment: its SCM spec, surrogate and record) and a generator to the next
call, ``(tool name, arguments)``, or None to stop (`policy_registry.Policy`). One module per family, each registering
its policies by name on import (`policy_registry.register_policy`):

* `scripted`: `random`, `range_ends`, `oracle`; `EpsilonPolicy` (an expert mixed with random calls) and
  `random_call`.
* `greedy_eig`: `greedy_eig`, the largest expected information gain about the target's parents.
* `regret`: `thompson`, `expected_improvement`, aiming at regret under the posterior draws.
* `belief_line`: `belief_line` (`BeliefPolicy`, sets the line's last entry) and `teacher` (it, with two flaws).

`policy_catalogue.POLICIES` is every registered policy, in the registered order (random, range_ends, greedy_eig,
thompson, expected_improvement, belief_line, teacher, oracle); the catalogue finds the modules itself, so a new
baseline is one module here that registers itself, plus its test. `play.run_policy` plays one episode,
`play.episode_messages` turns it into chat messages; `python -m training.tasks.causal.evaluate_baselines` plays the
policies on a split or an SCM file.

This file imports nothing, so importing one policy module does not import the others.
"""

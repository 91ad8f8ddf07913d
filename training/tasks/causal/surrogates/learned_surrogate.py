"""A learned surrogate: amortised parent logits (pretrained by behavioural cloning of the exact surrogate) refined
per episode by gradient steps on the episode's own data.

Amortised part. For every ordered pair (node v, candidate parent j), `pair_features` reads the data so far:
the correlation of X_v and X_j on v's non-intervened rows, their partial correlation given all other variables
there, the correlation of X_j and X_v on the rows where X_j was intervened on (a cause moves its effect), the same on
the rows where X_v was intervened on (reverse direction), their absolute values, and log row counts. A small MLP
(shared over pairs, so any d works) maps them to a logit l_vj. It is pretrained by behavioural cloning: supervised
imitation of the exact surrogate's parent marginals (binary cross-entropy against those soft targets) on data from
seeded linear SCMs of 3 to 6 variables under random interventions (`pretrain`). The weights are cached under
STRICT_GRPO_CACHE (`causal_learned_surrogate/<fingerprint>.pt`, written to a temporary file then renamed), the
fingerprint a hash of the pretraining settings, the code that pretrains, the library versions and the thread count
(`_fingerprint`); pretraining takes a few seconds on one CPU thread.

Per-episode part (what `update` trains). A soft-gated linear-Gaussian model of every node, as in DCDI (Brouillard et
al. 2020, "Differentiable causal discovery from interventional data"): gates G_vj = sigmoid(Gamma_vj), weights
W_vj, biases b_v, log noise scales s_v, and the data loss

    NLL = mean over nodes v and over the rows where v was NOT intervened on of
          -log N(x_v ; b_v + sum_j G_vj W_vj x_j, exp(s_v)^2)

(intervened rows are cut from their node's likelihood, as in the exact surrogate), plus a pull of Gamma towards the
amortised logits l (binary cross-entropy of G against sigmoid(l), weight `prior_weight` / n_rows), plus a 2-cycle
penalty sum_{v<j} G_vj G_jv. `update(samples, intervened)` appends the rows, recomputes l, and takes `steps` Adam
steps on that loss over all rows so far. The target's parent marginals are G_tj; the parent-set distribution treats
the candidates as independent Bernoullis (so its entropy is the sum of the binary entropies). Unlike the exact
surrogate it has no guarantee: `python -m training.tasks.causal.surrogates.compare_surrogates` measures how it compares.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn

from training.tasks.causal.surrogates.exact_surrogate import LinearModel, topological_order
from training.tasks.causal.surrogates.linear_scores import NodeStats, check_batch, correlations, merge_rows
from training.tasks.causal.surrogates.registry import SurrogateKind, register_surrogate
from training.tasks.causal.surrogates.surrogate import IndependentParentPosterior, check_variables

N_FEATURES = 11
PRETRAIN = {"version": 1, "n_scms": 160, "sizes": [3, 4, 5, 6], "snapshots": [0, 3, 8, 16, 30], "initial": 5,
            "hidden": 32, "steps": 400, "lr": 0.01, "seed": 0}


def pair_features(stats: NodeStats, samples: np.ndarray, intervened: np.ndarray) -> np.ndarray:
    """(d, d, N_FEATURES): features of (node v, candidate j); the diagonal is unused."""
    d = stats.count.shape[0]
    corr, _ = correlations(stats.count[None], stats.mean[None], stats.m2[None])
    corr = corr[0]  # (v, i, j): correlation over v's rows
    rho = corr[np.arange(d), np.arange(d), :]  # rho[v, j] = corr(X_v, X_j) on v's rows
    prec = np.linalg.inv(corr + 1e-3 * np.eye(d))  # (v, d, d)
    pv = prec[np.arange(d), np.arange(d), :]  # P_vj on v's rows
    pdiag = np.diagonal(prec, axis1=1, axis2=2)  # (v, d)
    partial = -pv / np.sqrt(pdiag[np.arange(d), np.arange(d)][:, None] * pdiag)
    rho_int = np.zeros((d, d))  # rho_int[v, j] = corr(X_v, X_j) on rows where j was intervened on
    n_int = intervened.sum(axis=0).astype(float)
    for j in range(d):
        rows = samples[intervened[:, j]]
        if len(rows) >= 3:
            c = rows - rows.mean(0)
            sd = np.sqrt((c ** 2).sum(0))
            ok = sd > 1e-12 * (np.abs(rows).max(0) + 1e-300)
            if ok[j]:
                rho_int[:, j] = np.where(ok, c.T @ c[:, j] / np.where(ok, sd * sd[j], 1.0), 0.0)
    logn = np.log1p(stats.count)
    feats = np.stack([
        rho, np.abs(rho), partial, np.abs(partial), rho_int, np.abs(rho_int), rho_int.T, np.abs(rho_int.T),
        np.broadcast_to(logn[:, None], (d, d)) / 5, np.broadcast_to(np.log1p(n_int)[None, :], (d, d)) / 5,
        np.broadcast_to(np.log1p(n_int)[:, None], (d, d)) / 5,
    ], axis=-1)
    return np.nan_to_num(feats, nan=0.0, posinf=0.0, neginf=0.0)


class PairMLP(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, 1))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.net(feats).squeeze(-1)


def _fingerprint(settings: dict) -> str:
    """Everything that changes the pretrained weights: the settings, the code that makes the data and trains (this
    module and the SCM, score and DP modules it calls), the numpy and torch versions and torch's thread count."""
    import importlib

    modules = ["training.tasks.causal.surrogates.learned_surrogate", "training.tasks.causal.scm.families",
               "training.tasks.causal.scm.scm", "training.tasks.causal.surrogates.linear_scores",
               "training.tasks.causal.surrogates.structure_posterior", "training.tasks.causal.surrogates.subsets"]
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for name in modules:
        h.update(Path(importlib.import_module(name).__file__).read_bytes())
    h.update(f"numpy {np.__version__} torch {torch.__version__} threads {torch.get_num_threads()}".encode())
    return h.hexdigest()[:16]


def cache_path(settings: dict = PRETRAIN) -> Path:
    root = Path(os.environ.get("STRICT_GRPO_CACHE", Path.home() / ".cache" / "strict_grpo"))
    return root / "causal_learned_surrogate" / f"{_fingerprint(settings)}.pt"


def bc_dataset(settings: dict = PRETRAIN) -> tuple[np.ndarray, np.ndarray]:
    """(features (N, F), exact parent marginals (N,)) for every off-diagonal pair of every snapshot."""
    from training.tasks.causal.scm.families import FAMILIES, random_scm
    from training.tasks.causal.surrogates.linear_scores import log_local_scores
    from training.tasks.causal.surrogates.structure_posterior import parent_log_posterior

    rng = np.random.default_rng(settings["seed"])
    xs, ys = [], []
    for i in range(settings["n_scms"]):
        d = settings["sizes"][i % len(settings["sizes"])]
        scm = random_scm(FAMILIES[i % 4], d, 50_000 + i)
        rows = scm.sample(settings["initial"], rng)
        mask = np.zeros_like(rows, dtype=bool)
        for k in range(max(settings["snapshots"]) + 1):
            if k in settings["snapshots"]:
                st = merge_rows(NodeStats.empty(d), rows, mask)
                lb = log_local_scores(st.count[None], st.mean[None], st.m2[None])
                marg = np.zeros((d, d))
                for t in range(d):
                    p = np.exp(parent_log_posterior(lb, t)[0][0])
                    for j in range(d):
                        marg[t, j] = p[[m for m in range(1 << d) if m >> j & 1]].sum() if j != t else 0.0
                f = pair_features(st, rows, mask)
                off = ~np.eye(d, dtype=bool)
                xs.append(f[off]), ys.append(marg[off])
            var = scm.actionable[int(rng.integers(len(scm.actionable)))] if rng.random() < 0.8 else None
            if var is None:
                new = scm.sample(1, rng)
                m = np.zeros_like(new, dtype=bool)
            else:
                new = scm.sample(1, rng, {var: float(rng.uniform(-3, 3))})
                m = np.zeros_like(new, dtype=bool)
                m[0, scm.index[var]] = True
            rows, mask = np.vstack([rows, new]), np.vstack([mask, m])
    return np.concatenate(xs), np.concatenate(ys)


def pretrain(settings: dict = PRETRAIN) -> PairMLP:
    torch.manual_seed(settings["seed"])
    x, y = (torch.tensor(a, dtype=torch.float32) for a in bc_dataset(settings))
    model = PairMLP(settings["hidden"])
    opt = torch.optim.Adam(model.parameters(), lr=settings["lr"])
    loss_fn = nn.BCEWithLogitsLoss()
    for _ in range(settings["steps"]):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    model.bc_loss = float(loss.detach())
    return model


@lru_cache(maxsize=4)
def _pretrained_cached(key: str) -> PairMLP:
    settings = json.loads(key)
    path = cache_path(settings)
    model = PairMLP(settings["hidden"])
    if path.exists():
        model.load_state_dict(torch.load(path, weights_only=True))
    else:
        model = pretrain(settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(fd)
        torch.save(model.state_dict(), tmp)
        os.replace(tmp, path)  # atomic: a reader never sees half a file
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _reaches(parents: list[list[int]], start: int, goal: int) -> bool:
    """Whether `goal` is reachable from `start` along parent -> child edges (`parents[v]` are v's parents): the
    edge j -> v closes a cycle iff j is reachable from v."""
    children: dict[int, list[int]] = {}
    for v, ps in enumerate(parents):
        for p in ps:
            children.setdefault(p, []).append(v)
    seen, stack = {start}, [start]
    while stack:
        for c in children.get(stack.pop(), []):
            if c == goal:
                return True
            if c not in seen:
                seen.add(c), stack.append(c)
    return start == goal


def pretrained_model(settings: dict = PRETRAIN) -> PairMLP:
    return _pretrained_cached(json.dumps(settings, sort_keys=True))


class LearnedSurrogate:
    """See the module docstring."""

    name = "learned"

    def __init__(self, variables: list[str], target: str, steps: int = 20, lr: float = 0.05,
                 prior_weight: float = 5.0, settings: dict = PRETRAIN):
        check_variables(variables, target, "learned", None)
        self.variables, self.target = list(variables), target
        self.d, self.t = len(variables), variables.index(target)
        self.steps, self.lr, self.prior_weight = steps, lr, prior_weight
        self.amortised = pretrained_model(settings)
        self.stats = NodeStats.empty(self.d)
        self.samples = np.zeros((0, self.d))
        self.intervened = np.zeros((0, self.d), dtype=bool)
        self.updates = 0
        d = self.d
        self.offdiag = torch.tensor(~np.eye(d, dtype=bool))
        self.prior_logits = self._amortised_logits()
        self.gamma = nn.Parameter(self.prior_logits.clone())
        self.weight = nn.Parameter(torch.zeros(d, d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.log_sd = nn.Parameter(torch.zeros(d))
        self.opt = torch.optim.Adam([self.gamma, self.weight, self.bias, self.log_sd], lr=lr)
        self._mu = None  # per-variable standardisation of the data (fixed from the first rows)

    def _amortised_logits(self) -> torch.Tensor:
        f = pair_features(self.stats, self.samples, self.intervened)
        with torch.no_grad():
            return self.amortised(torch.tensor(f, dtype=torch.float32)).masked_fill(~self.offdiag, -30.0)

    def _standardise(self, x: np.ndarray) -> torch.Tensor:
        if self._mu is None:
            ref = self.samples if len(self.samples) > 1 else x
            self._mu, self._sd = ref.mean(0), np.where(ref.std(0) > 0, ref.std(0), 1.0)
        return torch.tensor((x - self._mu) / self._sd, dtype=torch.float32)

    def data_nll(self, samples: np.ndarray, intervened: np.ndarray) -> torch.Tensor:
        """Mean Gaussian NLL of each node given its soft-gated parents, over rows where the node is not intervened."""
        x = self._standardise(samples)
        keep = torch.tensor(~intervened, dtype=torch.float32)
        gates = torch.sigmoid(self.gamma) * self.offdiag
        mu = self.bias + x @ (gates * self.weight).T  # mu[n, v] = b_v + sum_j G_vj W_vj x_nj
        var = torch.exp(2 * self.log_sd)
        nll = 0.5 * ((x - mu) ** 2 / var + 2 * self.log_sd + np.log(2 * np.pi))
        return (nll * keep).sum() / keep.sum().clamp(min=1.0)

    def _loss(self) -> torch.Tensor:
        gates = torch.sigmoid(self.gamma)
        target = torch.sigmoid(self.prior_logits)
        prior = nn.functional.binary_cross_entropy(gates[self.offdiag], target[self.offdiag], reduction="sum")
        cycles = torch.triu(gates * gates.T * self.offdiag, diagonal=1).sum()
        n = max(len(self.samples), 1)
        return self.data_nll(self.samples, self.intervened) + (self.prior_weight * prior + cycles) / n

    def update(self, samples: np.ndarray, intervened: np.ndarray) -> None:
        samples, intervened = check_batch(samples, intervened, self.d)
        self.stats = merge_rows(self.stats, samples, intervened)
        self.samples = np.vstack([self.samples, samples])
        self.intervened = np.vstack([self.intervened, intervened])
        self.prior_logits = self._amortised_logits()
        with torch.enable_grad():  # an evaluation loop plays episodes under no_grad; the refinement still trains
            for _ in range(self.steps):
                self.opt.zero_grad()
                loss = self._loss()
                loss.backward()
                self.opt.step()
        self.updates += 1

    def marginals(self) -> np.ndarray:
        with torch.no_grad():
            return torch.sigmoid(self.gamma[self.t]).numpy().astype(float) * (np.arange(self.d) != self.t)

    def posterior(self) -> IndependentParentPosterior:
        p = self.marginals()
        return IndependentParentPosterior(self.target, {self.variables[j]: float(p[j]) for j in range(self.d)
                                                        if j != self.t})

    def entropy(self) -> float:
        return self.posterior().entropy()

    def gates(self) -> np.ndarray:
        """P(X_j ∈ Pa(X_v)) for every node v (rows) and candidate j (columns), 0 on the diagonal."""
        with torch.no_grad():
            return torch.sigmoid(self.gamma).numpy().astype(float) * ~np.eye(self.d, dtype=bool)

    @property
    def counts(self) -> np.ndarray:
        """Rows per node that a draw's parameters come from (the belief line needs >= 2 for every node)."""
        return self.stats.count

    def posterior_models(self, n: int, rng: np.random.Generator) -> list[LinearModel]:
        """n linear-Gaussian models: each edge j -> v drawn with probability G_vj, an edge that would close a cycle
        dropped (edges added in decreasing G), and the fitted weights, biases and noise scales in the data's units.
        The draws spread over structures only (the parameters are the point estimates)."""
        if len(self.samples) < 2:
            raise ValueError("posterior_models needs >= 2 rows")
        gates = self.gates()
        with torch.no_grad():
            weight, bias = self.weight.numpy().astype(float), self.bias.numpy().astype(float)
            noise = np.exp(self.log_sd.numpy().astype(float))
        mu, sd = self._mu, self._sd
        ranked = sorted(zip(*np.nonzero(gates > 0)), key=lambda e: -gates[e])
        models = []
        for present in rng.random((n, self.d, self.d)) < gates:
            parents = [[] for _ in range(self.d)]
            for v, j in ranked:
                if present[v, j] and not _reaches(parents, v, j):
                    parents[v].append(int(j))
            parents = [sorted(p) for p in parents]
            centre = [mu[p] for p in parents]
            coef = [sd[v] * weight[v, p] / sd[p] for v, p in enumerate(parents)]
            models.append(LinearModel(topological_order(parents), parents, mu + sd * bias, centre, coef, sd * noise))
        return models

    def entropy_after(self, samples: np.ndarray, intervened: np.ndarray) -> float:
        """The entropy after adding a batch, without mutating: a copy updated with it (`steps` Adam steps). No
        batched `what_if_many`: greedy EIG's hundreds of candidates a call would each train a copy."""
        new = self.copy()
        new.update(samples, intervened)
        return new.entropy()

    def expected_gain(self, do: tuple[int, float] | None, mask: np.ndarray, draws: int,
                      rng: np.random.Generator) -> float | None:
        """The entropy drop the surrogate expects of a call (nats), as `ExactSurrogate.expected_gain`: the current
        entropy minus the mean entropy after the call's rows as answered by `draws` models from `posterior_models`.
        None before 2 rows per node."""
        if np.any(self.stats.count < 2):
            return None
        fixed = {} if do is None else {do[0]: do[1]}
        answers = [(model.simulate(fixed, rng.standard_normal(mask.shape)), mask)
                   for model in self.posterior_models(draws, rng)]
        return float(self.entropy() - np.mean([self.entropy_after(*a) for a in answers]))

    def copy(self) -> LearnedSurrogate:
        import copy

        return copy.deepcopy(self)


register_surrogate(SurrogateKind("learned", lambda variables, target, max_parents=None: LearnedSurrogate(variables, target),
                                None, bounded=False, sampled=True, lookahead=False))

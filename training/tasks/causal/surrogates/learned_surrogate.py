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
fingerprint being a hash of every pretraining setting; pretraining takes a few seconds on one CPU thread.

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
from itertools import product
from pathlib import Path

import numpy as np
import torch
from torch import nn

from training.tasks.causal.surrogates.linear_scores import NodeStats, check_batch, correlations, merge_rows
from training.tasks.causal.surrogates.subsets import MAX_VARS
from training.tasks.causal.surrogates.surrogate import ParentPosterior

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
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


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


def pretrained_model(settings: dict = PRETRAIN) -> PairMLP:
    return _pretrained_cached(json.dumps(settings, sort_keys=True))


class LearnedSurrogate:
    """See the module docstring."""

    name = "learned"

    def __init__(self, variables: list[str], target: str, steps: int = 20, lr: float = 0.05,
                 prior_weight: float = 5.0, settings: dict = PRETRAIN):
        if target not in variables:
            raise ValueError(f"target: {target!r} is not one of the variables {variables}")
        if not 2 <= len(variables) <= MAX_VARS:
            raise ValueError(f"variables: 2..{MAX_VARS} supported, got {len(variables)}")
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
        for _ in range(self.steps):
            self.opt.zero_grad()
            loss = self._loss()
            loss.backward()
            self.opt.step()
        self.updates += 1

    def marginals(self) -> np.ndarray:
        with torch.no_grad():
            return torch.sigmoid(self.gamma[self.t]).numpy().astype(float) * (np.arange(self.d) != self.t)

    def posterior(self) -> ParentPosterior:
        p = self.marginals()
        cands = [j for j in range(self.d) if j != self.t]
        sets, probs = [], []
        for bits in product((0, 1), repeat=len(cands)):
            sets.append(frozenset(self.variables[j] for j, b in zip(cands, bits) if b))
            probs.append(np.prod([p[j] if b else 1 - p[j] for j, b in zip(cands, bits)]))
        probs = np.array(probs)
        return ParentPosterior(self.target, tuple(sets), probs / probs.sum(),
                               {self.variables[j]: float(p[j]) for j in cands})

    def entropy(self) -> float:
        p = np.clip(self.marginals()[[j for j in range(self.d) if j != self.t]], 1e-12, 1 - 1e-12)
        return float(-(p * np.log(p) + (1 - p) * np.log(1 - p)).sum())

    def copy(self) -> LearnedSurrogate:
        import copy

        return copy.deepcopy(self)

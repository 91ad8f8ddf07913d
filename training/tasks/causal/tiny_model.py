"""`tiny-qwen3-causal`: the offline tiny Qwen3 (`training.run_setup.tiny_qwen3.TINY_ARCH` with 4 layers instead of 2:
`CAUSAL_ARCH`) with a tokenizer fitted to the causal task, so that an episode fits the 1024-token context and each
decision is one token.

Why 4 layers: imitating the belief-reading expert (600 steps, 32 held-out SCMs, greedy), the 2-layer model set the
line's best entry in 0.11 to 0.28 of its calls (chance: ~0.2), the 4-layer one in 0.96 (measured when
the size was chosen; no command in the repository rebuilds it, so the results ledger does not carry it).

The default tiny tokenizer spells the causal episode in byte pieces: the prompt alone (tool schemas, variables,
data summary) is ~840 tokens, a 3-call episode ~1200. Here the BPE merges are learned from rendered causal
episodes (`corpus`: seeded SCMs of 3 to 10 variables with random names, budgets 1 to 20, random calls of every tool,
the Qwen3 chat template with the environment's tool schemas), after a pre-tokenizer that isolates every word
(any identifier but a JSON key: `X3`, `PKA`, `blood_pressure`, `gain`) and every number (`-1.5`, `+0.6`, `2.18`) as
its own piece, with the space before it if there is one (`PIECES`). A name at the start of a line (an option:
`PKA=3.0 gain 12 ...`) and in the call's JSON (`"variable": "PKA"`) is the same pieces, and so is a value (`3.0`
after `=` and after `"value": `), which is what copying them needs. The corpus names its variables at random
(`scm.names`, style "random"), so that no name is a token of its own: the first starting policy was built on a
tokenizer whose corpus used the bundled names, where X1, PKA or yield were single tokens; it copied those and failed
on the generated codes (2 or 3 pieces), calling a variable the SCM does not have in 53 of 192 greedy calls. Now every
name is a few pieces in training as in use (`PKA`: 2), and a number one piece, which the learned merges keep whole
for some numbers and split for others (` 27` one token, ` 41` two: ` 4` `1`). Elsewhere BPE merges freely.
The default `tiny-qwen3` is untouched (the other recipes' measured results depend on it).

Built deterministically into the cache (`STRICT_GRPO_CACHE/models/tiny-qwen3-causal-<fingerprint>-seed<N>`), the
fingerprint hashing the corpus, the vocabulary size, the architecture, the building modules' source and the library
versions, like `training.run_setup.tiny_qwen3`.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from training.evaluation.pairing_seeds import corpus_scm_seed
from training.outputs.atomic import atomic_directory
from training.run_setup.build_keys import numerics, source_digest
from training.run_setup.tiny_qwen3 import (
    MARKUP_TOKENS,
    SPECIAL_TOKENS,
    TINY_ARCH,
    _tokenizer_corpus,
    build_model,
    build_tokenizer,
    qwen3_chat_template,
)

CAUSAL_MODEL_NAME = "tiny-qwen3-causal"
VOCAB_SIZE = 2048
CORPUS_EPISODES = 200
CAUSAL_ARCH = {**TINY_ARCH, "num_hidden_layers": 4}

# words and numbers, each one piece (with the space before it) never merged with its neighbours; a JSON key
# (`"value":`) merges with its quotes, and a number after a colon keeps its space out (`"value": -3.0`)
PIECES = r' ?(?>[A-Za-z_][A-Za-z0-9_]*)(?!":)|(?<!:) ?[-+]?\d+(?:\.\d+)?'


def causal_arch(hidden_size: int = 128, num_hidden_layers: int = 4, num_attention_heads: int = 4) -> dict:
    """`CAUSAL_ARCH` at another width, depth or head count, its proportions kept (the feed-forward 3 x the width, half
    as many key-value heads as heads, the width split over the heads); the defaults give `CAUSAL_ARCH` itself."""
    if hidden_size % num_attention_heads or num_attention_heads % 2:
        raise ValueError(f"the width ({hidden_size}) must split over an even number of heads ({num_attention_heads})")
    return {**CAUSAL_ARCH, "hidden_size": hidden_size, "intermediate_size": 3 * hidden_size,
            "num_hidden_layers": num_hidden_layers, "num_attention_heads": num_attention_heads,
            "num_key_value_heads": num_attention_heads // 2, "head_dim": hidden_size // num_attention_heads}


def _episode_text(renderer, k: int) -> str:
    """Corpus episode k: its own generator (seed k), the k-th graph family in turn, its SCM seed from the seed rule."""
    from training.tasks.causal.env import CausalEnv, make_causal_env
    from training.tasks.causal.scm.families import FAMILIES, random_scm
    from training.tasks.causal.splits import scm_row, styled
    from training.tool_use.system_prompt import tool_schemas

    rng = np.random.default_rng(k)
    d = int(rng.integers(3, 11))
    # linear SCMs only: the text is the same for both families, and a nonlinear SCM's numerical optimum (computed at
    # reset) would cost ~1 s per episode
    # random names (`scm.names`, style "random"): no name of the bundled styles or of a user's file becomes a token of
    # its own, so every name is a few pieces, in training as in use, and copying one is one skill
    scm = styled(random_scm(FAMILIES[k % len(FAMILIES)], d, corpus_scm_seed(k), "linear"), rng, style="random")
    row = scm_row(scm, seed=k, budget=int(rng.integers(1, 21)))
    # the options' numbers come from the exact surrogate (up to 6 variables; its updates at d = 10 are slow, and
    # the no-op surrogate's line, marginals only, has the same words)
    env = make_causal_env("exact" if d <= 6 else "noop")()
    messages = [{"role": "user", "content": row["prompt"][0]["content"] + env.reset(**row)}]
    for _ in range(row["budget"] + 1):  # one call past the budget: its error text is in the corpus too
        if rng.random() < 0.1:
            name, args = "observe", {}
        elif rng.random() < 0.5:
            name, args = "choose", {"option": int(rng.integers(1, 5))}
        else:
            var = scm.actionable[int(rng.integers(len(scm.actionable)))]
            lo, hi = scm.ranges[var]
            grid = rng.random() < 0.5
            val = float(rng.choice(np.round(np.linspace(lo, hi, 5), 1))) if grid else round(float(rng.uniform(lo, hi)), 2)
            name, args = "intervene", {"variable": var, "value": val}
        out = getattr(env, name)(**args)
        messages.append({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": name, "arguments": args}}]})
        messages.append({"role": "tool", "name": name, "content": out})
    messages.append({"role": "assistant", "content": "Done."})
    return renderer.apply_chat_template(messages, tools=tool_schemas(CausalEnv), tokenize=False,
                                        enable_thinking=False)


@lru_cache(maxsize=1)
def corpus() -> tuple[str, ...]:
    """The texts the BPE merges are learned from (rendered with the default tiny tokenizer's chat template: the
    template is text, so which tokenizer renders it does not matter). Fixed, seeded."""
    renderer = build_tokenizer()
    return tuple(_episode_text(renderer, s) for s in range(CORPUS_EPISODES)) + tuple(_tokenizer_corpus())


def build_causal_tokenizer() -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PIECES), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=SPECIAL_TOKENS + MARKUP_TOKENS)
    bpe.train_from_iterator(corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS, model_max_length=TINY_ARCH["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
    )
    tokenizer.add_tokens(MARKUP_TOKENS, special_tokens=False)
    tokenizer.chat_template = qwen3_chat_template()
    return tokenizer


def fingerprint(arch: dict = CAUSAL_ARCH) -> str:
    payload = json.dumps([list(corpus()), VOCAB_SIZE, PIECES, arch, SPECIAL_TOKENS, MARKUP_TOKENS,
                          source_digest(__name__, "training.run_setup.tiny_qwen3"), numerics(threads=False)])
    return hashlib.sha256(payload.encode()).hexdigest()[:8]


def write_causal_tiny_qwen3(out_dir: str | Path, seed: int = 0, arch: dict = CAUSAL_ARCH) -> Path:
    """Write a loadable tiny Qwen3 of shape `arch` with the causal tokenizer to `out_dir` (atomically: `out_dir`
    appears only when complete, so a killed build leaves nothing that looks usable)."""
    out = Path(out_dir)
    with atomic_directory(out) as tmp:
        tokenizer = build_causal_tokenizer()
        model = build_model(tokenizer, seed, arch)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "tiny_qwen3.json").write_text(json.dumps({"seed": seed, "arch": arch, "variant": CAUSAL_MODEL_NAME,
                                                         "fingerprint": fingerprint(arch)}, indent=2, sort_keys=True))
    return out


def resolve_causal_model(cache: Path, seed: int = 0, arch: dict = CAUSAL_ARCH) -> str:
    """The cached `tiny-qwen3-causal` directory for `seed` and `arch`, built on first use (another shape than
    `CAUSAL_ARCH` is named by its width and depth too)."""
    shape = "" if arch == CAUSAL_ARCH else f"-h{arch['hidden_size']}l{arch['num_hidden_layers']}"
    out = cache / "models" / f"{CAUSAL_MODEL_NAME}{shape}-{fingerprint(arch)}-seed{seed}"
    if not out.is_dir():
        write_causal_tiny_qwen3(out, seed, arch)
    return str(out)

"""LM episodes in the causal environment (training.tasks.causal.policy_episodes), with a scripted model: calls run through the
same tool layer as training, limits end episodes as TRL's loop does, records carry every metric, and episode k is
paired with the baselines' episode k."""

import json
from dataclasses import replace

import pytest
import torch
from transformers import AutoTokenizer

from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.tool_loop import sampling_chat_template, tool_suffix_ids
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.policies.scripted import OraclePolicy, RandomPolicy
from training.tasks.causal.policy_episodes import baseline_episodes, lm_episodes, mean_metrics
from training.tasks.causal.reward_components import COMPONENTS, episode_rewards
from training.tasks.causal.splits import DATA_DIR

KW = {"enable_thinking": False}


def call(name, **arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


class ScriptedLM(torch.nn.Module):
    """`generate` answers turn t of every episode with script[t] (then EOS); records what it was shown."""

    def __init__(self, tokenizer, script: list[str]):
        super().__init__()
        self.tok, self.script, self.turn, self.inputs = tokenizer, script, 0, []
        self.config = type("Config", (), {"max_position_embeddings": 1024})()
        self.generation_config = type("GenerationConfig", (), {"eos_token_id": [tokenizer.eos_token_id]})()
        self.device = torch.device("cpu")

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        text = self.script[min(self.turn, len(self.script) - 1)]
        self.turn += 1
        self.inputs.append([row[mask.bool()].tolist() for row, mask in zip(input_ids, attention_mask)])
        new = self.tok(text, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
        new = torch.tensor(new[:max_new_tokens]).repeat(len(input_ids), 1)
        return torch.cat([input_ids, new], dim=1)


@pytest.fixture(scope="module")
def tok(causal_model_dir):
    return AutoTokenizer.from_pretrained(causal_model_dir)


@pytest.fixture(scope="module")
def rows():
    return load_rows(DATA_DIR / "heldout.jsonl")[:2]


def play(tok, rows, script, **kw):
    lm = ScriptedLM(tok, script)
    settings = EpisodeSettings(chat_template=sampling_chat_template(tok), template_kwargs=KW,
                               max_completion_length=720, max_iterations=7, max_tool_calls=7)
    return lm, lm_episodes(lm, tok, rows, replace(settings, **kw))


def test_calls_run_through_the_training_tool_layer_and_records_carry_every_metric(tok, rows):
    row = rows[0]
    other = [v for v in json.loads(row["scm_json"])["variables"] if v != row["target"]][0]
    top = json.loads(row["scm_json"])["ranges"][other][1]  # the bundled ranges vary
    script = [call("intervene", variable=other, value=top), call("intervene", variable=row["target"], value=1.0),
              "<tool_call>\n{not json\n</tool_call>", call("intervene", variable=other, value="high"),
              call("observe"), "Done."]
    lm, (record, *_) = play(tok, [row], script)
    assert lm.turn == 6
    assert [(c["tool"], c["valid"]) for c in record["call_log"]] == [("intervene", True), ("intervene", False),
                                                                     ("observe", True)]
    assert record["invalid"] == {"target_variable": 1} and record["invalid_calls"] == 1.0
    assert record["malformed"] == {"bad_json": 1, "bad_arguments": 1} and record["malformed_calls"] == 2.0
    assert record["calls"] == 2.0 and record["budget"] == row["budget"]
    for key in ("regret", "parent_f1", "info_gain", "final_entropy", "reward", *COMPONENTS):
        assert isinstance(record[key], float)
    # turn 2 was shown: the prompt, turn 1, then exactly the template's tool suffix (concatenation, as TRL does)
    first, second = lm.inputs[0][0], lm.inputs[1][0]
    turn = tok(script[0], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert second[: len(first) + len(turn)] == first + turn
    suffix = second[len(first) + len(turn):]
    decoded = tok.decode(suffix)
    assert decoded.startswith("\n<|im_start|>user\n<tool_response>\n") and "(5 calls left)" in decoded


def test_the_iteration_limit_and_the_completion_length_end_episodes(tok, rows):
    row = rows[0]
    other = [v for v in json.loads(row["scm_json"])["variables"] if v != row["target"]][0]
    endless = [call("intervene", variable=other, value=json.loads(row["scm_json"])["ranges"][other][0])]
    _, (capped,) = play(tok, [row], endless, max_iterations=2)
    assert capped["calls"] == 2.0
    _, (short,) = play(tok, [row], endless, max_completion_length=40)
    assert short["calls"] == 1.0  # the first call ran; its reply would overflow 40 tokens, so the episode ends


def test_episode_k_is_paired_with_the_baselines_episode_k(tok, rows):
    lm, records = play(tok, rows, ["Done."], episodes_per_row=2)
    prompts = [tok.decode(ids) for ids in lm.inputs[0]]
    for i, row in enumerate(rows):
        for k in range(2):
            reset_text = run_policy(RandomPolicy(), row, k).reset_text
            assert reset_text in prompts[2 * i + k] and records[2 * i + k]["env_seed"] == \
                baseline_episodes("random", [row], 2)[k]["env_seed"]
    assert all(r["calls"] == 0.0 for r in records)


def test_baseline_records_are_the_environment_records():
    row = load_rows(DATA_DIR / "heldout.jsonl")[3]
    (rec,) = baseline_episodes("oracle", [row], 1)
    ref = run_policy(OraclePolicy(), row, 0)
    assert rec["regret"] == ref.regret and rec["optimization"] == episode_rewards(ref)["optimization"]
    assert mean_metrics([rec])["episodes"] == 1.0
    with pytest.raises(ValueError, match="baseline"):
        baseline_episodes("smart", [row], 1)


def test_tool_suffix_matches_trl(tok):
    from trl import GRPOTrainer

    messages = [{"role": "tool", "name": "observe", "content": "X0=1.0"}]
    mine = tool_suffix_ids(tok, sampling_chat_template(tok), KW, messages)
    fake = type("T", (), {"processing_class": tok, "chat_template": sampling_chat_template(tok),
                          "chat_template_kwargs": KW, "_is_vlm": False, "_tokenizer": tok})()
    assert mine == GRPOTrainer._get_tool_suffix_ids(fake, messages)

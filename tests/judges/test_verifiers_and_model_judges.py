"""Rule verifiers, the embedding judge (bundled MiniLM, offline) and the reward-model judge, behind one protocol."""

import pytest
import torch

from judges.embedding import EmbeddingJudge, bundled_minilm_path
from judges.protocol import Group, GroupJudge, JudgeConfigError
from judges.reward_model import RewardModelJudge
from judges.verifiers import ExactMatchJudge, FormatJudge, JsonValidityJudge, ToolCallValidityJudge


def test_exact_match():
    judge = ExactMatchJudge()
    assert isinstance(judge, GroupJudge)
    group = Group("q", ["52", "The answer: 52.", "37", "", "520"], {"answer": "52"})
    assert judge.score_group(group).scores == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert ExactMatchJudge(extract="stripped").score_group(group).scores == [1.0, 0.0, 0.0, 0.0, 0.0]
    with pytest.raises(JudgeConfigError, match="'answer'"):
        judge.score_group(Group("q", ["52"], {"label": "52"}))


def test_format_and_json():
    assert FormatJudge(r"\d+").score_group(Group("q", ["52", " 52 ", "52!", ""])).scores == [1.0, 1.0, 0.0, 0.0]
    texts = ['{"a": 1}', "[1, 2]", "{'a': 1}", "nope"]
    assert JsonValidityJudge().score_group(Group("q", texts)).scores == [1.0, 0.0, 0.0, 0.0]
    assert JsonValidityJudge(require_object=False).score_group(Group("q", texts)).scores == [1.0, 1.0, 0.0, 0.0]


def test_tool_call_validity_knows_the_tool_names():
    good = '<tool_call>\n{"name": "read_channel", "arguments": {"channel": "eng"}}\n</tool_call>'
    unknown = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'
    broken = "<tool_call>\n{name: read_channel}\n</tool_call>"
    result = ToolCallValidityJudge(["read_channel"]).score_group(Group("q", [good, unknown, broken, "no call"]))
    assert result.scores == [1.0, 0.0, 0.0, 0.0]
    assert result.metrics["invalid_tool_call_frac"] == pytest.approx(2 / 3)


@pytest.fixture(scope="module")
def embedding_judge():
    """Loaded in offline mode (the bundled model must not need the hub); the setting is undone afterwards."""
    import huggingface_hub.constants as hub_constants

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
        return EmbeddingJudge()


def test_embedding_judge_prefers_the_reference_answer_offline(embedding_judge):
    assert (bundled_minilm_path() / "model.safetensors").exists()
    scores = embedding_judge.score_group(Group("q", ["52", "37", "hello there", ""], {"answer": "52"})).scores
    assert scores[0] == pytest.approx(1.0, abs=1e-4)
    assert scores[0] > scores[1] > scores[2]
    assert all(0.0 <= s <= 1.0 for s in scores)
    with pytest.raises(JudgeConfigError, match="'answer'"):
        embedding_judge.score_group(Group("q", ["52"], {}))


@pytest.fixture(scope="module")
def tiny_reward_model_dir(tiny_model_dir, tmp_path_factory):
    """An offline tiny `Qwen3ForSequenceClassification` (num_labels=1) with the tiny Qwen3's tokenizer."""
    from transformers import AutoConfig, AutoTokenizer, Qwen3ForSequenceClassification

    out = tmp_path_factory.mktemp("tiny_rm")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = AutoConfig.from_pretrained(tiny_model_dir, num_labels=1, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    Qwen3ForSequenceClassification(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


def test_reward_model_judge_batched_equals_one_by_one(tiny_reward_model_dir):
    prompt = [{"role": "user", "content": "Which number is larger: 37 or 52?"}]
    group = Group(prompt, ["52", "37", "The larger number is 52, clearly.", ""], {"answer": "52"})
    batched = RewardModelJudge(tiny_reward_model_dir, batch_size=4, template_kwargs={"enable_thinking": False})
    single = RewardModelJudge(tiny_reward_model_dir, batch_size=1, template_kwargs={"enable_thinking": False})
    got, ref = batched.score_group(group), single.score_group(group)
    assert got.calls == 1 and ref.calls == 4
    assert got.scores == pytest.approx(ref.scores, abs=1e-5)  # right padding does not move a sequence's score
    assert len(set(round(s, 6) for s in got.scores)) == 4

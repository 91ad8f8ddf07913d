"""Where an LLM judge's answer comes from: a local transformers causal LM, or an OpenAI-compatible HTTP endpoint
(such as `vllm serve`). A backend takes chat messages and returns only the judge's own generated text."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Protocol

import torch

from judges.protocol import JudgeConfigError, JudgeError


class ChatBackend(Protocol):
    """`complete(messages) -> str`: the assistant's reply text only, never the prompt echoed back."""

    def complete(self, messages: list[dict]) -> str: ...


class TransformersChatBackend:
    """Greedy generation with a local causal LM; returns only the newly generated tokens, decoded.

    Args:
        model_path: a directory or hub id `from_pretrained` can load (the trainer resolves names such as
            `tiny-qwen3` in `judge_kwargs` before a judge is built).
        max_new_tokens: the judge's answer budget.
        template_kwargs: chat-template arguments; thinking is off by default so the answer is the JSON itself.
        device: where the model runs.
    """

    def __init__(
        self, model_path: str, max_new_tokens: int = 128, template_kwargs: dict | None = None, device: str = "cpu"
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(model_path).to(device).eval()
        self.max_new_tokens = max_new_tokens
        self.template_kwargs = {"enable_thinking": False, **(template_kwargs or {})}
        self.device = device

    @torch.no_grad()
    def complete(self, messages: list[dict]) -> str:
        text = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, **self.template_kwargs
        )
        inputs = self.tokenizer(text, return_tensors="pt", add_special_tokens=False).to(self.device)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is not None and inputs["input_ids"].shape[1] + self.max_new_tokens > limit:
            raise JudgeError(
                f"judge prompt has {inputs['input_ids'].shape[1]} tokens; with max_new_tokens={self.max_new_tokens} "
                f"that exceeds the judge model's {limit} positions"
            )
        out = self.model.generate(
            **inputs,
            max_new_tokens=self.max_new_tokens,
            do_sample=False,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        return self.tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


class OpenAIChatBackend:
    """POST `{base_url}/chat/completions` (OpenAI's chat API, as vLLM and others serve it), bounded in time and size.

    Args:
        base_url: e.g. `http://127.0.0.1:8000/v1`.
        model: the served model's name.
        timeout_s: socket timeout of one request.
        max_tokens: the judge's answer budget.
        max_response_bytes: a longer response body is refused, not read on.
        api_key_env: name of an environment variable holding a bearer token, if the endpoint wants one.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        timeout_s: float = 60.0,
        max_tokens: int = 256,
        max_response_bytes: int = 1_000_000,
        api_key_env: str | None = None,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise JudgeConfigError(f"OpenAIChatBackend: base_url {base_url!r} must start with http:// or https://")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.max_response_bytes = max_response_bytes
        self.api_key_env = api_key_env

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            if self.api_key_env not in os.environ:
                raise JudgeConfigError(f"OpenAIChatBackend: environment variable {self.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        return headers

    def complete(self, messages: list[dict]) -> str:
        body = json.dumps(
            {"model": self.model, "messages": messages, "temperature": 0.0, "max_tokens": self.max_tokens}
        ).encode()
        request = urllib.request.Request(self.url, data=body, headers=self._headers(), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                payload = response.read(self.max_response_bytes + 1)
        except urllib.error.HTTPError as err:
            detail = err.read(2000).decode(errors="replace")
            raise JudgeError(f"judge endpoint {self.url} answered HTTP {err.code}", detail) from None
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            raise JudgeError(f"judge endpoint {self.url} failed: {err}") from None
        if len(payload) > self.max_response_bytes:
            raise JudgeError(f"judge endpoint {self.url} sent more than {self.max_response_bytes} bytes")
        text = payload.decode(errors="replace")
        try:
            content = json.loads(text)["choices"][0]["message"]["content"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            raise JudgeError(f"judge endpoint {self.url} sent no choices[0].message.content", text[:2000]) from None
        if not isinstance(content, str):
            raise JudgeError(f"judge endpoint {self.url} sent non-text content", text[:2000])
        return content

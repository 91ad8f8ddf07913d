"""TRL's vLLM server client, with a weight sync that runs on CPU and a server that must serve the trainer's model.

TRL 1.16's `VLLMClient` syncs weights over vLLM's NCCL weight-transfer engine only and raises NotImplementedError
without a CUDA device. `CpuSyncVLLMClient` keeps TRL's client for everything else and, where the trainer is on CPU,
drives the same four weight-transfer routes over a gloo group instead (the server side is
training/run_setup/vllm_gloo_engine.py, which a server started by launchers/vllm_server.sh registers).

`server_mismatch` compares what the server serves with what the trainer trains (dtype, tokenizer) and names the
first difference; a server whose model cannot take the trainer's weights (another architecture or size) is named at
the first sync, which runs before the first generation. A server that is not up within the recipe's
`vllm_server_timeout`, or stops answering, is named with its URL. Each is a `SamplerServerError`: one `error:` line
(training/errors.py), and the run's checkpoints stay for `--resume_from_checkpoint true` once the server is back.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch
from trl.generation.vllm_client import VLLMClient

from training.errors import BadInputError
from training.run_setup.vllm_plugin import BACKEND

DEFAULT_TIMEOUT_S = 240.0  # TRL's default vllm_server_timeout
RESTART = "restart it and resume with --resume_from_checkpoint true"
TOKENIZER_PROBE = "<|im_start|>user\nintervene on X3 = -1.25, then read Y<|im_end|>\n"


class SamplerServerError(BadInputError):
    """The vLLM server is not up, stopped answering, or cannot serve this trainer: fixed by (re)starting it."""


class ServerMismatchError(SamplerServerError):
    """The vLLM server serves another model, dtype or tokenizer than the trainer trains."""


class CpuSyncVLLMClient(VLLMClient):
    """`VLLMClient` whose weight sync runs over gloo where the trainer is on CPU (TRL's NCCL sync elsewhere)."""

    def __init__(self, *args, connection_timeout: float = 0.0, **kwargs):
        # the gloo group's too (TRL's `vllm_server_timeout`): a peer that stops answering fails a sync after this long
        self.timeout_s = connection_timeout or DEFAULT_TIMEOUT_S
        super().__init__(*args, connection_timeout=connection_timeout, **kwargs)

    def check_server(self, total_timeout: float = 0.0, retry_interval: float = 2.0):
        import requests

        try:
            super().check_server(total_timeout, retry_interval)
        except requests.exceptions.ConnectionError as err:
            raise SamplerServerError(
                f"the vLLM server at {self.base_url} is not up after {total_timeout:g} s (vllm_server_timeout): start "
                "it with launchers/vllm_server.sh --model MODEL, the model the trainer trains") from err

    def _get(self, url: str, **kwargs) -> dict:
        with _server_answers(self.base_url, url):
            return super()._get(url, **kwargs)

    def _post(self, url: str, **kwargs) -> dict:
        with _server_answers(self.base_url, url):
            return super()._post(url, **kwargs)

    def init_communicator(self, device=0):
        device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        if device.type == "cuda":
            return super().init_communicator(device)
        backend = (self.get_server_info().get("weight_transfer_config") or {}).get("backend")
        if backend != BACKEND:
            raise ServerMismatchError(
                f"the vLLM server at {self.base_url} takes weights by {backend!r}, and a trainer on {device.type} "
                f"syncs by {BACKEND!r}: start it with launchers/vllm_server.sh (--weight-transfer-config "
                f"'{{\"backend\": \"{BACKEND}\"}}')")
        from vllm.utils.network_utils import get_ip

        from training.run_setup.vllm_gloo_engine import gloo_group

        world_size = self.get_world_size() + 1
        init_info = {"master_address": get_ip(), "master_port": self.group_port, "rank_offset": 1,
                     "world_size": world_size, "timeout_s": self.timeout_s}
        with ThreadPoolExecutor(max_workers=1) as executor:  # the server joins the group while answering the request
            joined = executor.submit(self._post_once, "/init_weight_transfer_engine", {"init_info": init_info})
            self.communicator = gloo_group(init_info["master_address"], self.group_port, 0, world_size,
                                           self.timeout_s)
            joined.result()

    def update_named_params(self, metadata, named_params):
        if not self._syncs_by_gloo():
            return super().update_named_params(metadata, named_params)
        from training.run_setup.vllm_gloo_engine import pack, packed_size

        names, dtype_names, shapes = (list(field) for field in zip(*metadata, strict=True))
        buffer = pack((tensor for _, tensor in named_params), packed_size(dtype_names, shapes))
        if not self._updating_weights:
            self._start_weight_update()
        with ThreadPoolExecutor(max_workers=1) as executor:  # the workers receive while answering the request
            received = executor.submit(self._post_once, "/update_weights", {"update_info": {
                "names": names, "dtype_names": dtype_names, "shapes": shapes}})
            try:
                self.communicator.broadcast(buffer, 0).wait()
            except RuntimeError as err:  # gloo: the peer closed its end or did not answer within timeout_s
                raise SamplerServerError(f"the vLLM server at {self.base_url} stopped taking weights ({err}); "
                                         f"{RESTART}") from err
            try:
                received.result()
            except ServerRequestError as err:
                if not self._answers():  # its engine died while it took them: its API process answered for it
                    raise SamplerServerError(
                        f"the vLLM server at {self.base_url} stopped answering while it took the weights ({err}); "
                        f"{RESTART}") from err
                raise ServerMismatchError(
                    f"the vLLM server at {self.base_url} cannot load the trainer's weights, so it serves another "
                    f"model than the trainer trains: {err}") from err
        if not self._updating_weights:
            self._finish_weight_update()

    def _answers(self) -> bool:
        import requests

        try:
            return requests.get(f"{self.base_url}/health", timeout=10).status_code == 200
        except requests.exceptions.RequestException:
            return False

    def _post_once(self, route: str, payload: dict) -> dict:
        """A request the server answers while it joins a collective: never retried (TRL's session retries errors),
        since a second try would wait in a collective the trainer does not join again."""
        import requests

        with _server_answers(self.base_url, self.base_url + route):
            response = requests.post(self.base_url + route, json=payload, timeout=self.timeout_s)
            if response.status_code != 200:
                raise ServerRequestError(f"{route}: {response.status_code} {response.text[:600]}")
            return response.json()

    def close_communicator(self):
        if self._syncs_by_gloo():
            self.communicator = None
            return
        super().close_communicator()

    def _syncs_by_gloo(self) -> bool:
        return isinstance(self.communicator, torch.distributed.ProcessGroup)


class ServerRequestError(RuntimeError):
    """The server answered a request with an error status (its text says why)."""


@contextmanager
def _server_answers(base_url: str, url: str):
    import requests

    try:
        yield
    except requests.exceptions.RequestException as err:
        raise SamplerServerError(
            f"the vLLM server at {base_url} stopped answering ({url.removeprefix(base_url)}: "
            f"{type(err).__name__}); {RESTART}") from err
    except Exception as err:
        if str(err).startswith("Request failed:"):  # TRL's `_get`/`_post` on an error status
            raise ServerRequestError(f"{url.removeprefix(base_url)}: {str(err)[:600]}") from err
        raise


def served_dtype(client: VLLMClient) -> str:
    return str(client.get_server_info()["model_config"]["dtype"]).removeprefix("torch.")


def server_mismatch(client: VLLMClient, tokenizer, dtype: str, served: str) -> str | None:
    """What differs between what the server serves (in dtype `served`) and what the trainer trains (None: nothing),
    as one sentence."""
    if served != dtype:
        return (f"it computes in {served} and the trainer trains in {dtype}: its sample-time log-probs would be "
                f"another precision's (start it with --dtype {dtype})")
    theirs = client._post(f"{client.base_url}/tokenize", json={"model": client.model, "prompt": TOKENIZER_PROBE,
                                                               "add_special_tokens": False})["tokens"]
    mine = tokenizer(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"]
    if theirs != mine:
        return (f"its tokenizer reads a probe text as {len(theirs)} tokens {theirs[:8]}..., the trainer's as "
                f"{len(mine)} {mine[:8]}... (serve the trainer's tokenizer)")
    return None

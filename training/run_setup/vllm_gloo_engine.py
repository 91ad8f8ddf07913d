"""A gloo weight-transfer engine for vLLM on CPU: how the trainer's weights reach a vLLM server without a GPU.

TRL 1.16 syncs a server's weights through vLLM's weight-transfer API (`/init_weight_transfer_engine`, then
`/start_weight_update`, `/update_weights`, `/finish_weight_update` each step), and vLLM's engines for it (NCCL, CUDA
IPC) need a GPU. This engine speaks the same API over a gloo group between the trainer (rank 0) and the server's
workers (ranks 1..N): registered with vLLM as `BACKEND` (training/run_setup/vllm_plugin.py, a vLLM general plugin,
so it exists in the server's worker processes) and chosen by the server's `--weight-transfer-config
'{"backend": "gloo"}'`. One update is one broadcast: every tensor's bytes packed back to back in the order the
update's metadata names them, unpacked on the worker into views and handed to the model's own `load_weights`.

This module imports torch and vLLM only: it is loaded inside vLLM's worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
from vllm.distributed.utils import init_gloo_process_group
from vllm.distributed.weight_transfer.base import (
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)

_STORE_PREFIX = "strict_grpo_weight_sync"


@dataclass
class GlooInitInfo(WeightTransferInitInfo):
    master_address: str
    master_port: int
    rank_offset: int
    world_size: int
    timeout_s: float = 240.0


@dataclass
class GlooUpdateInfo(WeightTransferUpdateInfo):
    names: list[str]
    dtype_names: list[str]
    shapes: list[list[int]]
    packed: bool = True  # TRL's client sends it for vLLM's NCCL engine; one packed broadcast is this engine's only way


def gloo_group(address: str, port: int, rank: int, world_size: int, timeout_s: float):
    """A gloo process group outside torch.distributed's global state: rank 0 (the trainer) hosts the store."""
    timeout = timedelta(seconds=timeout_s)
    store = torch.distributed.TCPStore(address, port, world_size, is_master=rank == 0, timeout=timeout,
                                       wait_for_workers=False)
    return init_gloo_process_group(torch.distributed.PrefixStore(_STORE_PREFIX, store), rank, world_size, timeout)


def packed_size(dtype_names: list[str], shapes: list[list[int]]) -> int:
    return sum(torch.Size(shape).numel() * getattr(torch, dtype).itemsize for dtype, shape in zip(dtype_names, shapes))


def pack(tensors, size: int) -> torch.Tensor:
    """The tensors' bytes back to back in one uint8 buffer of `size` bytes, each copied as it comes: TRL's weight
    iterator merges a LoRA adapter while it yields and unmerges once exhausted, so a tensor kept uncopied would be
    read after the unmerge (the base weights, not the trained ones)."""
    buffer, start = torch.empty(size, dtype=torch.uint8), 0
    for tensor in tensors:
        data = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
        buffer[start:start + data.numel()].copy_(data)
        start += data.numel()
    if start != size:
        raise ValueError(f"the weights streamed are {start} bytes, and their metadata announced {size}")
    return buffer


def unpack(buffer: torch.Tensor, dtype_names: list[str], shapes: list[list[int]]) -> list[torch.Tensor]:
    views, start = [], 0
    for dtype_name, shape in zip(dtype_names, shapes):
        dtype = getattr(torch, dtype_name)
        size = torch.Size(shape).numel() * dtype.itemsize
        views.append(buffer[start:start + size].view(dtype).reshape(shape))
        start += size
    return views


def check_same_size(shapes: list[list[int]], model: torch.nn.Module) -> None:
    """The trainer's first update (TRL sends the whole model in one) holds as many numbers as the served model.

    vLLM's loaders narrow what they are given to the shard they expect: a trainer's model with a wider MLP loads
    without an error into a narrower served one, and samples from a truncated copy. vLLM fuses some of the trainer's
    tensors (q, k, v into one), so names and shapes do not compare one to one; their sizes add up the same, once the
    rows vLLM pads each vocabulary with (to a multiple of 64) are left out and tied weights counted once."""
    sent = sum(torch.Size(shape).numel() for shape in shapes)
    held = sum(p.numel() for p in model.parameters()) - vocabulary_padding(model)
    if sent != held:
        raise ValueError(f"the trainer's model has {sent:,} parameters and the served model {held:,}: the server "
                         "serves another model than the trainer trains")


def vocabulary_padding(model: torch.nn.Module) -> int:
    """The padded rows' numbers in the model's embedding and LM head (vLLM's `VocabParallelEmbedding`s)."""
    padding, seen = 0, set()
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if hasattr(module, "num_embeddings_padded") and weight is not None and id(weight) not in seen:
            seen.add(id(weight))
            padding += (module.num_embeddings_padded - module.org_vocab_size) * weight.shape[-1]
    return padding


class GlooWeightTransferEngine(WeightTransferEngine[GlooInitInfo, GlooUpdateInfo]):
    """The worker's side: join the trainer's gloo group, receive each update's packed buffer, load it."""

    init_info_cls = GlooInitInfo
    update_info_cls = GlooUpdateInfo
    supports_draft_weight_update = False

    def __init__(self, config, vllm_config, device, model) -> None:
        super().__init__(config, vllm_config, device, model)
        self.group = None
        self.sized = False  # each trainer's first update is checked against the model's size

    def init_transfer_engine(self, init_info: GlooInitInfo) -> None:
        parallel = self.parallel_config
        worker_rank = parallel.data_parallel_index * parallel.world_size + parallel.rank
        self.group = gloo_group(init_info.master_address, init_info.master_port,
                                worker_rank + init_info.rank_offset, init_info.world_size, init_info.timeout_s)
        self.sized = False

    def start_weight_update(self) -> None:
        """Weights are written in place (their loaders stay live on CPU: training/run_setup/vllm_cpu_weights.py)."""

    def finish_weight_update(self) -> None:
        pass

    def update_weights(self, update_info) -> None:
        # the base class ends with torch.accelerator.synchronize(), which has no accelerator to wait for here
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info: GlooUpdateInfo) -> None:
        if self.group is None:
            raise RuntimeError("gloo weight transfer not initialised: call /init_weight_transfer_engine first")
        buffer = torch.empty(packed_size(update_info.dtype_names, update_info.shapes), dtype=torch.uint8)
        self.group.broadcast(buffer, 0).wait()  # received before any check: the trainer's broadcast must complete
        if not self.sized and self.parallel_config.world_size == 1:  # a shard holds part of the model
            check_same_size(update_info.shapes, self.model)
            self.sized = True
        self.model.load_weights(zip(update_info.names, unpack(buffer, update_info.dtype_names, update_info.shapes)))

    def shutdown(self) -> None:
        self.group = None

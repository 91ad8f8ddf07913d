"""Read back what a run sent to its trackers, through the trackers' own storage: W&B's offline run file (its
LevelDB-style record log of `wandb_internal_pb2.Record` protobufs, the file `wandb sync` uploads) and trackio's
local SQLite store (`trackio.sqlite_storage.SQLiteStorage`)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK = 32 * 1024  # W&B's record log: LevelDB log format, 32 KiB blocks, 7-byte record headers
HEADER = 7  # file header: ":W&B", magic (2 bytes), version (1 byte)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_records(path: Path) -> list:
    """Every `Record` in a `.wandb` file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    if not data.startswith(b":W&B"):
        raise ValueError(f"{path}: not a W&B run file")
    records, pending, pos = [], b"", HEADER
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # block trailer too short for a header: skip to the next block
            pos += BLOCK - pos % BLOCK
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == FULL:
            pending = chunk
        elif kind == FIRST:
            pending = chunk
            continue
        elif kind == MIDDLE:
            pending += chunk
            continue
        elif kind == LAST:
            pending += chunk
        else:  # zero padding at the end of a block
            continue
        record = wandb_internal_pb2.Record()
        record.ParseFromString(pending)
        records.append(record)
    return records


def wandb_offline_run(wandb_dir: Path) -> dict:
    """history rows, config, run info and artifacts of the single offline run under `wandb_dir`."""
    (path,) = Path(wandb_dir).glob("wandb/offline-run-*/run-*.wandb")
    history, config, run, artifacts = [], {}, None, []
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.history.item})
        elif kind == "run":
            run = record.run
            config.update({u.key: json.loads(u.value_json) for u in record.run.config.update})
        elif kind == "config":
            config.update({u.key: json.loads(u.value_json) for u in record.config.update})
        elif kind == "artifact":
            artifacts.append(record.artifact)
    return {"history": history, "config": config, "run": run, "artifacts": artifacts}


def trackio_run(trackio_dir: Path, project: str, run: str) -> dict:
    """logs, config and artifacts of a trackio run in the local store `trackio_dir` (TRACKIO_DIR)."""
    import os
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from trackio.sqlite_storage import SQLiteStorage as S\n"
        "p, r = sys.argv[1], sys.argv[2]\n"
        "arts = S.get_run_artifacts(p, r, None)\n"
        "print(json.dumps({'logs': S.get_logs(p, r), 'config': S.get_run_config(p, r), 'runs': S.get_runs(p),"
        " 'artifacts': arts, 'manifests': {a['name']: S.get_artifact_manifest(p, a['name'], a.get('version'))"
        " for group in arts.values() for a in group}}, default=str))\n"
    )
    # TRACKIO_DIR is read when trackio is imported: a fresh interpreter reads this store, not the default one.
    proc = subprocess.run([sys.executable, "-c", code, project, run], capture_output=True, text=True, check=True,
                          env={**os.environ, "TRACKIO_DIR": str(trackio_dir)}, timeout=120)
    return json.loads(proc.stdout.strip().splitlines()[-1])

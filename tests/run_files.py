"""Readers for what tracking wrote: W&B's `.wandb` run log and TensorBoard event files.

The `.wandb` file is W&B's record log: a 7-byte header, then 32 KiB blocks of chunks (CRC32, length,
type: full / first / middle / last), each record a `wandb_internal_pb2.Record` protobuf, parsed here
with W&B's own protobuf classes. TensorBoard files are TFRecords of tensorboardX's `Event` protobuf.
"""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
CHUNK_HEADER = 7


def wandb_records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", "not a .wandb file"
    records, pending, pos = [], b"", 7
    while pos + CHUNK_HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK_HEADER:  # block tail padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + CHUNK_HEADER])
        if kind == 0:
            pos += left
            continue
        if pos + CHUNK_HEADER + length > len(data):  # a torn last chunk (the writer was killed): stop there
            break
        payload = data[pos + CHUNK_HEADER : pos + CHUNK_HEADER + length]
        pos += CHUNK_HEADER + length
        pending = payload if kind in (1, 2) else pending + payload
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def wandb_run(run_dir: Path) -> dict[str, Any]:
    """{id, group, config, history: [{key: value}], summary, exit_code, preempting} of an offline run folder."""
    (log,) = Path(run_dir).glob("run-*.wandb")
    out: dict[str, Any] = {"config": {}, "history": [], "summary": {}, "exit_code": None, "preempting": False}
    for record in wandb_records(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["id"], out["group"] = record.run.run_id, record.run.run_group
            out["config"] |= {item.key: json.loads(item.value_json) for item in record.run.config.update}
        elif kind == "config":
            out["config"] |= {item.key: json.loads(item.value_json) for item in record.config.update}
        elif kind == "history":
            out["history"].append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
        elif kind == "summary":
            for item in record.summary.update:
                out["summary"][item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
        elif kind == "exit":
            out["exit_code"] = record.exit.exit_code
        elif kind == "preempting":
            out["preempting"] = True
    return out


def tensorboard_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} from every event file under `log_dir`."""
    from tensorboardX.proto import event_pb2

    scalars: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for path in sorted(Path(log_dir).rglob("events.out.tfevents.*")):
        data, pos = path.read_bytes(), 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            event = event_pb2.Event()
            event.ParseFromString(data[pos + 12 : pos + 12 + length])
            pos += 12 + length + 4  # length, its CRC, the data, the data's CRC
            for value in event.summary.value:
                scalars[value.tag].append((event.step, value.simple_value))
    return dict(scalars)


SBX_PROGRESS = Path(__file__).parent / "data" / "sbx_progress"


def sbx_progress_keys(algo: str) -> list[str]:
    """The header of a real SBX run's progress.csv for `algo` (sac, tqc, crossq: tests/data/sbx_progress)."""
    return (SBX_PROGRESS / f"{algo}.csv").read_text().splitlines()[0].split(",")

"""Which runs make one curve: the runs of an algo and env in one log folder (named by its label, RL Zoo's
`all_plots -l`), split by setting where their resolved hyperparameters (each run's config.yml) differ,
the differing keys naming the setting. Runs of different folders are never pooled: an SBX run and an
rlbench run are two systems, not two seeds."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from rlbench.errors import ConfigError
from rlbench.files import UntrustedFileError, parse_yaml, read_bounded_text

RUN_NAME = re.compile(r"(?P<env>.+)_(?P<id>\d+)(_[0-9a-f-]{36})?")
# RL Zoo writes config.yml with yaml.dump of an OrderedDict: this tag, then the constructor's argument list,
# whose one argument is the list of [key, value] pairs. The tag is dropped and the list read as plain YAML
# (nothing is constructed from a Python tag).
ZOO_ORDERED_TAG = "!!python/object/apply:collections.OrderedDict"
MAX_SHOWN_VALUE = 40  # characters of a setting's value in a legend


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def folder_labels(folders: list[Path], labels: list[str] | None) -> list[str]:
    """One label per folder: the given ones (ConfigError unless one per folder, each its own), else none
    for a single folder (curves keep the algo's name) and the folders' names (their paths where names repeat)."""
    if labels is not None:
        if len(labels) != len(folders):
            raise ConfigError(
                f"-l/--labels: {len(labels)} label(s) for {len(folders)} folder(s); give one label per folder, "
                "in the folders' order"
            )
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ConfigError(f"-l/--labels: {', '.join(map(repr, repeated))} given twice; each folder needs its own")
        return list(labels)
    if len(folders) == 1:
        return [""]
    names = [folder.resolve().name for folder in folders]
    return names if len(set(names)) == len(names) else [str(folder) for folder in folders]


def find_runs(folder: Path) -> dict[tuple[str, str], list[Path]]:
    """{(env, algo): run folders holding an evaluations.npz} under one RL Zoo log folder."""
    found: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for npz in sorted(Path(folder).glob("*/*/evaluations.npz")):
        match = RUN_NAME.fullmatch(npz.parent.name)
        if match:
            found[(match["env"], npz.parent.parent.name)].append(npz.parent)
    return dict(found)


def read_settings(run: Path, env: str) -> dict[str, Any] | None:
    """The run's resolved hyperparameters (`<run>/<env>/config.yml`, rlbench's mapping or RL Zoo's pairs),
    read bounded; None when there is none, or, with a warning naming the file, when it is unreadable."""
    path = run / env / "config.yml"
    if not path.is_file():
        return None
    try:
        text = read_bounded_text(path)
        value = parse_yaml(text.removeprefix(ZOO_ORDERED_TAG))
        if text.startswith(ZOO_ORDERED_TAG):
            value = zoo_pairs(value)
        if not isinstance(value, dict):
            raise UntrustedFileError(f"expected a mapping of hyperparameters, got {type(value).__name__}")
    except (OSError, UntrustedFileError) as error:
        warn(f"{path}: unreadable ({error}); its run's setting is unknown")
        return None
    return value


def zoo_pairs(arguments: object) -> object:
    """RL Zoo's OrderedDict arguments [[[key, value], ...]] as a mapping; anything else as it is (refused by
    the caller unless a mapping)."""
    if isinstance(arguments, list) and len(arguments) == 1 and isinstance(arguments[0], list):
        pairs = arguments[0]
        if all(isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in pairs):
            return {key: item for key, item in pairs}
    return arguments


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def shown(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= MAX_SHOWN_VALUE else text[: MAX_SHOWN_VALUE - 3] + "..."


def split_by_settings(runs: list[Path], env: str) -> list[tuple[str, list[Path]]]:
    """(setting, runs) per distinct value of the hyperparameters that differ between the runs, in the order
    first met; the setting names them (`key=value ...`, "unset" for a key a run lacks), or is "" when none
    differ. Runs without a readable config.yml go together ("config.yml unknown") when the others differ."""
    settings = {run: read_settings(run, env) for run in runs}
    known = [setting for setting in settings.values() if setting is not None]
    keys = sorted({key for setting in known for key in setting})
    differing = [key for key in keys if len({canonical(setting.get(key, "unset")) for setting in known}) > 1]
    if not differing:
        return [("", runs)]
    groups: dict[str, list[Path]] = {}
    for run in runs:
        setting = settings[run]
        label = (
            "config.yml unknown"
            if setting is None
            else " ".join(f"{key}={shown(setting.get(key, 'unset'))}" for key in differing)
        )
        groups.setdefault(label, []).append(run)
    return list(groups.items())

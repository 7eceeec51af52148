"""Weights & Biases tracking that never stops or stalls training.

- `wandb` is imported only when --track is given (exit 2 with the install hint if it is missing).
- WANDB_MODE, when set, is obeyed as is. Otherwise, with no API key the run goes offline at once;
  with a key, a W&B server (or the proxy to it) that refuses a TCP connection, or takes longer than
  `ONLINE_TIMEOUT_S` to accept one, sends the run offline at once, and an online start that fails
  falls back to offline. Either way the run says so and prints the `wandb sync` command for later.
  (W&B's own start retries an unreachable server for ~14 s whatever its init_timeout: measured with
  wandb 0.31, init_timeout 3 s, a refused port.)
- Metrics are logged against `global_step` = env steps, so a resumed run (same run id) continues
  the same x axis.
- The local run log is flushed every LOG_FLUSH_INTERVAL_S, so a killed trainer leaves a readable
  offline run with everything up to the last few seconds.
- `finish(exit_code)` is called on every way out: 0, 1 on failure, 75 when stopped by a signal
  (the run is marked preempting first, so W&B shows it as resumable rather than crashed).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rlbench.connectivity import connection_error
from rlbench.errors import ConfigError
from rlbench.redact import redact_argv

if TYPE_CHECKING:
    from wandb.sdk.wandb_run import Run

ONLINE_TIMEOUT_S = 10


def online_timeout_s() -> float:
    """W&B's own WANDB_INIT_TIMEOUT when set, else ONLINE_TIMEOUT_S."""
    try:
        return float(os.environ.get("WANDB_INIT_TIMEOUT", ONLINE_TIMEOUT_S))
    except ValueError:
        return ONLINE_TIMEOUT_S


# W&B buffers its local log (.wandb) and, by default, writes it every 15 s: a killed run loses up to
# that much. Writing is one append, microseconds; every 2 s bounds the loss on kill -9 or OOM.
LOG_FLUSH_INTERVAL_S = 2.0
STEP_METRIC = "global_step"


def import_wandb() -> ModuleType:
    try:
        import wandb
    except ImportError:
        raise ConfigError(
            "--track needs Weights & Biases, a dependency of rlbench: pip install -e . (or pip install wandb)"
        ) from None
    return wandb


def has_credentials(wandb: ModuleType) -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return bool(wandb.api.api_key)  # ~/.netrc or the settings file written by `wandb login`
    except Exception:
        return False


def unreachable_reason(url: str, timeout_s: float) -> str | None:
    """Why no TCP connection opens to the W&B server at `url`, or to the proxy that would carry the
    requests to it (HTTPS_PROXY and friends, NO_PROXY obeyed); None once one opens."""
    server = urllib.parse.urlsplit(url)
    if not server.hostname:
        return None  # not a URL this check understands: W&B's own start decides
    target = server
    proxy = urllib.request.getproxies().get(server.scheme)
    if proxy and not urllib.request.proxy_bypass(server.hostname):
        via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        target = via if via.hostname else server
    host, port = target.hostname, target.port or (443 if target.scheme == "https" else 80)
    assert host is not None, "the server's hostname, or the proxy's when it has one"
    error = connection_error(host, port, timeout_s)
    return None if error is None else f"{host}:{port} unreachable: {error}"


@contextlib.contextmanager
def masked_argv() -> Iterator[None]:
    """W&B records the command line as the run's own metadata (`sys.argv`, read when the run starts: its
    settings' `_args`, which no setting replaces), stored in the run file and shown as the run's command: it
    sees the command line with every credential masked, as command.txt holds it."""
    argv = sys.argv
    sys.argv = [*argv[:1], *redact_argv(argv[1:])]
    try:
        yield
    finally:
        sys.argv = argv


class WandbTracker:
    """The W&B run of one training run; also a Logger (log / close)."""

    def __init__(
        self,
        *,
        project: str,
        entity: str | None,
        group: str | None,
        tags: list[str],
        name: str,
        config: Mapping[str, Any],
        run_id: str | None = None,
    ):
        wandb = import_wandb()
        self.wandb = wandb
        common = dict(
            project=project,
            entity=entity,
            group=group,
            tags=tags or None,
            name=name,
            config=dict(config),
            id=run_id,
            resume="allow" if run_id else None,
            reinit="create_new",  # the seeds of one process are runs of their own, all open at once
        )
        settings = {"x_transaction_log_flush_interval": LOG_FLUSH_INTERVAL_S}
        settings = {k: v for k, v in settings.items() if k in getattr(wandb.Settings, "model_fields", {})}
        with masked_argv():
            self.run = self._start(wandb, common, settings)
        self.offline = bool(getattr(self.run.settings, "_offline", False)) or self.run.settings.mode == "offline"
        self.run.define_metric(STEP_METRIC)
        self.run.define_metric("*", step_metric=STEP_METRIC)
        self.finished = False

    @staticmethod
    def _start(wandb: ModuleType, common: dict[str, Any], settings: dict[str, Any]) -> Run:
        """The W&B run: WANDB_MODE's, else offline without credentials or server, else online."""
        mode = os.environ.get("WANDB_MODE")
        start = time.perf_counter()
        if mode:
            return wandb.init(settings=wandb.Settings(**settings), **common)
        if not has_credentials(wandb):
            print("W&B: no API key (wandb login or WANDB_API_KEY): logging offline", file=sys.stderr, flush=True)
            return wandb.init(mode="offline", settings=wandb.Settings(**settings), **common)
        try:
            base_url = wandb.setup().settings.base_url  # WANDB_BASE_URL, else W&B's settings files
        except Exception:
            base_url = ""  # wandb.init below meets the same trouble and reports it
        failure = unreachable_reason(base_url, online_timeout_s())
        if failure is None:
            try:
                online = wandb.Settings(init_timeout=online_timeout_s(), **settings)
                return wandb.init(mode="online", settings=online, **common)
            except Exception as error:  # server down, bad key: keep training, offline
                failure = f"{type(error).__name__}: {str(error)[:200]}"
        print(
            f"W&B: online start failed after {time.perf_counter() - start:.0f} s ({failure}): logging offline",
            file=sys.stderr,
            flush=True,
        )
        return wandb.init(mode="offline", settings=wandb.Settings(**settings), **common)

    @property
    def id(self) -> str:
        return self.run.id

    @property
    def sync_command(self) -> str:
        return f"wandb sync {Path(self.run.dir).parent}"

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        # Integers stay integers (time/fps, time/time_elapsed: SB3 logs them so); numpy and JAX scalars become floats.
        values = {
            k: v if isinstance(v, int) else float(v)
            for k, v in metrics.items()
            if not (isinstance(v, float) and math.isnan(v))
        }
        self.run.log({**values, STEP_METRIC: step})

    def close(self) -> None:
        """Loggers close when training ends; the run itself is finished by `finish` with the exit code."""

    def summarize(self, values: Mapping[str, object], files: list[Path], base: Path) -> None:
        for key, value in values.items():
            self.run.summary[key] = value
        # The links go straight into the run's files folder, where W&B keeps what it uploads, and are saved from
        # there: W&B then publishes them as they are, linking nothing again and printing no "Symlinked" line. A
        # staging folder beside it (one save call for all files) left a second link to every file, so a copy of
        # the offline run that follows links (cp -L, rsync -L, tar -h: how an offline run is taken to a machine
        # that can upload it) held the model twice.
        files_dir = Path(self.run.dir)
        if not files_dir.is_dir():  # WANDB_MODE=disabled: W&B keeps no files
            return
        for path in files:
            if path.exists():
                link = files_dir / path.relative_to(base)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.unlink(missing_ok=True)
                link.symlink_to(path.resolve())
                self.run.save(str(link), base_path=str(files_dir), policy="now")

    def finish(self, exit_code: int) -> None:
        if self.finished:
            return
        self.finished = True
        if exit_code == 75:
            self.run.mark_preempting()
        self.run.finish(exit_code=exit_code)
        if self.offline:
            print(f"W&B run saved offline; upload it with: {self.sync_command}", file=sys.stderr)

"""Writing an agent's frames to an mp4 (or gif) through ffmpeg, for enjoy.py --record and record_video.py.

ffmpeg is the binary imageio-ffmpeg ships (the video extra). It is started here rather than through
imageio's writer because imageio-ffmpeg starts it with `preexec_fn=os.setpgrp`: a Python callback in the
child forces a real fork() of a process in which JAX runs threads (JAX warns that this may deadlock).
`process_group=0` gives ffmpeg the same own process group (Ctrl-C in the terminal does not kill it before
it finishes the file) from C code, with no fork-time callback. The video is written to a temporary file
and renamed into place once ffmpeg has finished it, so a stopped recording leaves no torn video.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

import numpy as np

from rlbench.errors import ConfigError
from rlbench.files import TEMP_SUFFIX

INSTALL = 'pip install -e ".[video]"'


def find_ffmpeg() -> str:
    """The ffmpeg binary of the video extra; ConfigError with the install command when it is missing.
    (pygame is looked up, not imported: importing it prints a banner; the classic-control envs render with it.)"""
    try:
        import imageio_ffmpeg

        if importlib.util.find_spec("pygame") is None:
            raise ImportError("No module named 'pygame'")
        return str(imageio_ffmpeg.get_ffmpeg_exe())
    except (ImportError, RuntimeError) as error:
        raise ConfigError(
            f"recording needs the video extra ({error}): {INSTALL} (or pip install imageio-ffmpeg pygame)"
        ) from None


class VideoWriter:
    """`with VideoWriter(path, fps) as video: video.append(frame)` with [H, W, 3] uint8 frames."""

    def __init__(self, path: Path, fps: float, ffmpeg: str) -> None:
        self.path, self.fps, self.ffmpeg = Path(path), fps, ffmpeg
        self.process: subprocess.Popen[bytes] | None = None
        self.frames = 0

    def __enter__(self) -> VideoWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=TEMP_SUFFIX)
        os.close(fd)
        self.tmp = Path(tmp)
        return self

    def append(self, frame: np.ndarray) -> None:
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        if self.process is None:
            self.process = self._start(frame.shape[1], frame.shape[0])
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(frame.tobytes())
        except BrokenPipeError:
            self._finish()  # raises with ffmpeg's own message
        self.frames += 1

    def _start(self, width: int, height: int) -> subprocess.Popen[bytes]:
        container = "gif" if self.path.suffix == ".gif" else "mp4"
        # yuv420p (what players expect) needs even sizes: pad odd ones by a pixel rather than scale.
        encode = (
            []
            if container == "gif"
            else ["-vcodec", "libx264", "-pix_fmt", "yuv420p", "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2"]
        )
        command = [
            self.ffmpeg,
            "-y",
            "-loglevel",
            "error",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-s",
            f"{width}x{height}",
            "-r",
            f"{self.fps}",
            "-i",
            "-",
            "-an",
            *encode,
            "-f",
            container,
            str(self.tmp),
        ]
        return subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, process_group=0
        )

    def _finish(self) -> None:
        assert self.process is not None
        _, stderr = self.process.communicate()
        if self.process.returncode != 0:
            message = stderr.decode(errors="replace").strip().splitlines()
            raise RuntimeError(f"ffmpeg failed writing {self.path}: {message[-1] if message else 'no message'}")

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if self.process is not None:
                self._finish()
                if exc_type is None:
                    os.replace(self.tmp, self.path)
        finally:
            self.tmp.unlink(missing_ok=True)

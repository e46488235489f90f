"""A rich progress bar over a fixed number of stages, shown only where stderr is a terminal."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Stages:
    """``with stages.stage("compiling"): ...`` advances the bar after each stage.

    Disabled (a no-op) unless ``enabled`` and stderr is a terminal, so logs and tests see no
    control characters. ``total`` may be raised with :meth:`add` as stages become known.
    """

    def __init__(self, enabled: bool, total: int, title: str = "") -> None:
        self.progress: Any = None
        self.task: Any = None
        self.title = title
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            console = Console(stderr=True)
            if console.is_terminal:
                self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                         TimeElapsedColumn(), console=console, transient=True)
                self.progress.start()
                self.task = self.progress.add_task(title or "working", total=total)

    def add(self, n: int = 1) -> None:
        if self.progress is not None:
            task = self.progress.tasks[0]
            self.progress.update(self.task, total=(task.total or 0) + n)

    @contextlib.contextmanager
    def stage(self, text: str) -> Iterator[None]:
        if self.progress is not None:
            self.progress.update(self.task, description=f"{self.title}: {text}" if self.title else text)
        try:
            yield
        finally:
            if self.progress is not None:
                self.progress.advance(self.task)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

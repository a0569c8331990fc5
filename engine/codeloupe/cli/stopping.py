"""A command stopped by a signal where it is, as Ctrl-C stops it, but never inside an import."""

from __future__ import annotations

import _thread
import importlib._bootstrap
import importlib._bootstrap_external
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

# The import system's own code: a frame running it is an import in progress.
_IMPORTING = (vars(importlib._bootstrap), vars(importlib._bootstrap_external))
# How long the thread that sends a signal again after an import waits between its looks at the main thread (an
# import takes milliseconds to a second: the stop is not held back noticeably).
_IMPORT_LOOK_S = 0.005


class StopBySignal:
    """A main thread's handler for a signal (SIGTERM) that raises `stop()` where the command is, as Ctrl-C raises
    KeyboardInterrupt, so that it stops the same way (an index at its next file, its workers killed, closed), except
    inside an import. Raised there, it could land in the import system's own locking and leave the interpreter's
    import lock held: every later import in any other thread then waited for ever, the command's close waiting on
    that thread with it (`codeloupe serve` hung so, 1 SIGTERM in 4 on a loaded machine). A signal that comes during
    an import is sent again to the main thread, by a thread of its own (a low-level one: `threading` takes locks the
    interrupted thread may hold), once that import is done. A second signal, while the command stops or while the
    first waits for an import, kills the process, as the default action would."""

    def __init__(self, stop: Callable[[], BaseException]) -> None:
        self._stop = stop
        self._waiting = False  # a signal came during an import, and is sent again once it is done
        self._again = False  # this delivery is that one

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        again, self._again = self._again, False
        if self._waiting and not again:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if _importing(frame):
            self._waiting = True
            _thread.start_new_thread(self._send_after_import, (signum, _thread.get_ident()))
            return
        signal.signal(signum, signal.SIG_DFL)
        raise self._stop()

    def _send_after_import(self, signum: int, main: int) -> None:
        while _importing(frame := sys._current_frames().get(main)):
            time.sleep(_IMPORT_LOOK_S)
        if frame is not None:  # the main thread is still there
            self._again = True
            # A signal to the main thread, not `_thread.interrupt_main`: a wait it is in (a pool's results, a read)
            # ends with it, where a flag alone would wait until that wait ended.
            signal.pthread_kill(main, signum)


def _importing(frame: FrameType | None) -> bool:
    """Whether the thread whose innermost frame is `frame` is in an import (the module's own code included)."""
    while frame is not None:
        if frame.f_globals is _IMPORTING[0] or frame.f_globals is _IMPORTING[1]:
            return True
        frame = frame.f_back
    return False

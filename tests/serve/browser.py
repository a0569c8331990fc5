"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: commands in on fd 3,
answers out on fd 4, each a JSON text ended by NUL), for page tests that click, follow links and read the live
page, which `--dump-dom` cannot."""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import signal
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WAIT_S = 30.0  # a deadline for what a test waits on, never a time it asserts


class PageError(Exception):
    """Chromium refused a command, or the page's JavaScript threw."""


class Browser:
    """One headless Chromium, driving one tab at a time; `evaluate` runs JavaScript in that tab's current page.
    `requests` holds every request a driven tab sent since `record_requests`."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM, "needs Debian chromium (apt-get install -y chromium; scripts/test.sh does this as root)"
        commands_read, self._out = os.pipe()
        self._in, answers_write = os.pipe()
        # Copies far above 4, so placing them on fds 3 and 4 in the child never overwrites one with the other.
        command_in, answer_out = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (commands_read, answers_write))
        devnull = os.open(os.devnull, os.O_RDWR)
        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        # posix_spawn, not fork + exec in Python: the test process runs a server thread.
        self._pid = os.posix_spawn(CHROMIUM, args, dict(os.environ), file_actions=[
            (os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2),
            (os.POSIX_SPAWN_DUP2, command_in, 3), (os.POSIX_SPAWN_DUP2, answer_out, 4)])
        for fd in (commands_read, answers_write, command_in, answer_out, devnull):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self._recording = False
        self.requests: list[dict[str, Any]] = []  # Network.requestWillBeSent's `request`: url, headers, ...
        self._target = next(t for t in self._pages())["targetId"]
        self._driven = {self._target}  # every tab driven so far
        self._attach()

    def _pages(self) -> list[dict[str, Any]]:
        return [t for t in self._call("Target.getTargets")["targetInfos"] if t["type"] == "page"]

    def _attach(self) -> None:
        self._session = self._call("Target.attachToTarget", targetId=self._target, flatten=True)["sessionId"]
        self._call("Page.enable", session=True)
        if self._recording:
            self._call("Network.enable", session=True)

    def record_requests(self) -> None:
        """From now on, note in `requests` every request the driven tab (and any tab `follow_new_tab` drives
        later) sends."""
        self._recording = True
        self._call("Network.enable", session=True)

    def follow_new_tab(self) -> None:
        """Drive the tab the current one opened (a link opened in a new tab), once it exists."""
        deadline = time.monotonic() + WAIT_S
        while not (new := [t for t in self._pages() if t["targetId"] not in self._driven]):
            assert time.monotonic() < deadline, "no new tab was opened"
            time.sleep(0.1)
        self._target = new[0]["targetId"]
        self._driven.add(self._target)
        self._attach()

    def _call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + WAIT_S
        while True:
            answer = self._receive(deadline)
            if answer.get("method") == "Network.requestWillBeSent":
                self.requests.append(answer["params"]["request"])
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise PageError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([self._in], [], [], left)[0], "chromium did not answer"
            chunk = os.read(self._in, 1 << 20)
            assert chunk, "chromium exited"
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def open(self, url: str) -> None:
        """Load `url` in the tab (then wait for what its scripts show with `wait_for`)."""
        self._call("Page.navigate", session=True, url=url)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of `expression` (awaited when a promise) in the tab's current page."""
        result = self._call("Runtime.evaluate", session=True, expression=expression, awaitPromise=True,
                            returnByValue=True)
        if "exceptionDetails" in result:
            raise PageError(json.dumps(result["exceptionDetails"]))
        return result["result"].get("value")

    def middle_click(self, selector: str) -> None:
        """Middle-click (a link: open it in a new tab) the first element `selector` finds, as a user's mouse."""
        x, y = self.evaluate(f"""(() => {{ const node = document.querySelector({json.dumps(selector)});
            node.scrollIntoView({{block: "center"}}); const r = node.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self._call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="middle", clickCount=1)

    def wait_for(self, expression: str) -> Any:
        """The first truthy value of `expression`, polled until the deadline (a page being left or not yet
        loaded counts as not yet). A DOM node has no JSON value: wait for `!!node`."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except PageError:  # evaluated while the page was being replaced
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"never true in the page: {expression}")

    def close(self) -> None:
        os.close(self._out)
        os.close(self._in)
        os.kill(self._pid, signal.SIGKILL)  # its profile is a test's temporary folder: nothing to save
        os.waitpid(self._pid, 0)

"""A private headless Chromium driven over the DevTools protocol on a pipe.

    with Chromium() as browser:
        page = browser.open("file:///tmp/report.html", width=1200)
        page.console_errors, page.requests          # what the page logged and fetched
        png = page.screenshot()                     # the whole page, PNG bytes
        page.evaluate("document.title")

`--remote-debugging-pipe` (file descriptors 3 and 4, messages ended by NUL) opens no port
at all, so nothing else on the machine can talk to this browser and no port can clash.
Debian's `chromium` is installed by `make install-system`.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


class ChromiumError(RuntimeError):
    pass


def find_chromium() -> str:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise ChromiumError("no chromium on the PATH: run `make install-system` "
                        "(Debian package chromium)")


class Chromium:
    def __init__(self, binary: str | None = None):
        self.binary = binary or find_chromium()
        self._ids = itertools.count(1)
        self._lock = threading.Condition()
        self._replies: dict[int, dict] = {}
        self.events: list[dict] = []
        self._proc = None
        self._profile = None

    # -- process ----------------------------------------------------------------------
    def start(self) -> "Chromium":
        self._profile = tempfile.TemporaryDirectory(prefix="dpmstream-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds_3_and_4():
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self._proc = subprocess.Popen(
            [self.binary, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
             "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
             "--allow-file-access-from-files", f"--user-data-dir={self._profile.name}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=fds_3_and_4)
        os.close(to_child_r)
        os.close(from_child_w)
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._proc is None:
            return
        try:
            self.call("Browser.close", timeout=10)
        except ChromiumError:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()
        self._proc = None

    def __enter__(self) -> "Chromium":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- protocol ---------------------------------------------------------------------
    def _read(self) -> None:
        buf = b""
        while True:
            try:
                data = os.read(self._from_child, 1 << 16)
            except OSError:
                data = b""
            if not data:
                with self._lock:
                    self._lock.notify_all()
                return
            buf += data
            *messages, buf = buf.split(b"\0")
            with self._lock:
                for raw in messages:
                    msg = json.loads(raw)
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                self._lock.notify_all()

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60) -> dict:
        msg_id = next(self._ids)
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._lock:
            while msg_id not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self._proc.poll() is not None:
                    raise ChromiumError(f"{method}: no answer from chromium in {timeout} s")
                self._lock.wait(left)
            reply = self._replies.pop(msg_id)
        if "error" in reply:
            raise ChromiumError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, session: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for ev in self.events:
                    if ev["method"] == method and ev.get("sessionId") == session:
                        return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChromiumError(f"no {method} from chromium in {timeout} s")
                self._lock.wait(left)

    def open(self, url: str, width: int = 1200, height: int = 900) -> "Page":
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                  session=session)
        self.call("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        return page


class Page:
    def __init__(self, browser: Chromium, session: str):
        self.browser = browser
        self.session = session

    def _events(self, method: str) -> list[dict]:
        with self.browser._lock:
            return [e["params"] for e in self.browser.events
                    if e["method"] == method and e.get("sessionId") == self.session]

    @property
    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (failed loads...)."""
        out = [" ".join(str(a.get("value", a.get("description", ""))) for a in e["args"])
               for e in self._events("Runtime.consoleAPICalled") if e["type"] in ("error", "assert")]
        out += [e["exceptionDetails"].get("text", "exception")
                for e in self._events("Runtime.exceptionThrown")]
        out += [e["entry"]["text"] for e in self._events("Log.entryAdded")
                if e["entry"]["level"] == "error"]
        return out

    @property
    def requests(self) -> list[str]:
        """The URL of every request the page made (the page itself included)."""
        return [e["request"]["url"] for e in self._events("Network.requestWillBeSent")]

    def evaluate(self, expression: str):
        result = self.browser.call("Runtime.evaluate",
                                   {"expression": expression, "returnByValue": True},
                                   session=self.session)
        if "exceptionDetails" in result:
            raise ChromiumError(f"evaluate: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, full_page: bool = True) -> bytes:
        params = {"format": "png"}
        if full_page:
            width, height = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        data = self.browser.call("Page.captureScreenshot", params, session=self.session)["data"]
        return base64.b64decode(data)

    def pdf(self) -> bytes:
        data = self.browser.call("Page.printToPDF", {"printBackground": False},
                                 session=self.session)["data"]
        return base64.b64decode(data)

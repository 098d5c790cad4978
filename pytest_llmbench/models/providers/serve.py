"""Entry point of the embedded model server process.

Runs llama-cpp-python's OpenAI-compatible server on 127.0.0.1 and exits when the pytest
process that owns it is gone, so a killed run never leaves a server behind.

Usage: ``python -m pytest_llmbench.models.providers.serve --model PATH --port N --owner PID``
"""

from __future__ import annotations

import argparse
import os
import threading
import time


def _watch_owner(owner_pid: int, interval_s: float = 1.0) -> None:
    while True:
        time.sleep(interval_s)
        try:
            os.kill(owner_pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:  # the pid exists but belongs to someone else: it was reused
            os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description="pytest-llmbench embedded model server")
    parser.add_argument("--model", required=True, help="Path of the GGUF file")
    parser.add_argument("--alias", default="smollm2", help="Model name the server answers to")
    parser.add_argument("--port", type=int, required=True, help="Port on 127.0.0.1")
    parser.add_argument("--owner", type=int, required=True, help="Exit when this pid is gone")
    parser.add_argument("--n-ctx", type=int, default=8192, help="Context size in tokens")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads")
    parser.add_argument(
        "--logits-all",
        action="store_true",
        help="Keep every position's logits: prompt log-probabilities for log-likelihood scoring",
    )
    args = parser.parse_args()
    threading.Thread(target=_watch_owner, args=(args.owner,), daemon=True).start()

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    model = ModelSettings(
        model=args.model,
        model_alias=args.alias,
        n_ctx=args.n_ctx,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        logits_all=args.logits_all,
        verbose=False,
    )
    # interrupt_requests would let a new request cut off the stream in progress: with xdist
    # workers sharing this server, answers must queue, not truncate each other.
    server = ServerSettings(host="127.0.0.1", port=args.port, interrupt_requests=False)
    app = create_app(server_settings=server, model_settings=[model])
    if args.logits_all:
        _install_prompt_logprobs(args.alias)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


def _install_prompt_logprobs(alias: str) -> None:
    """Right prompt logprobs on echo (see :mod:`.prompt_logprobs`) for the loaded model."""
    from llama_cpp.server import app as server_app

    from .prompt_logprobs import install

    proxy = getattr(server_app, "_llama_proxy", None)
    if proxy is None:
        raise SystemExit("llama-cpp-python's server keeps its model elsewhere: cannot score")
    install(proxy(alias))


if __name__ == "__main__":
    main()

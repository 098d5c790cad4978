"""`llmbench view`: a Starlette app on 127.0.0.1 over the results folders it finds.

Why Starlette and uvicorn: both ship with the embedded model's server already (one extra,
``[view]``, nothing new to trust), start in about 0.3 s, serve plain HTML rendered here (no
JavaScript build, no CDN: it works offline), and are tested by driving a real Chromium.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..report import text
from ..results_folder import SERVED_FILES
from . import pages
from .queue import JobQueue, LaunchError, eval_files, parse_launch
from .runs import find_runs, load_run


@dataclass
class ViewSettings:
    """Where the viewer looks and launches."""

    roots: Sequence[Path]  #: folders holding results folders
    project: Path  #: where launched runs run (their eval files are under it)
    #: host names a request may be addressed to (DNS rebinding: another name is refused)
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "[::1]")
    #: ``--reviews-dir``: the shared labels folder (read after each run's, and written to)
    reviews_dir: Path | None = None


def create_app(settings: ViewSettings) -> Any:
    """The ASGI app (its queue thread started)."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
    from starlette.routing import Route

    roots = [root.resolve() for root in settings.roots]
    queue = JobQueue(roots[0] / ".llmbench-view" / "queue.json", settings.project, roots[0])
    queue.start()

    def html(body: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(body, status_code=status)

    def not_found(what: str) -> HTMLResponse:
        return html(pages.layout("Not found", f"<p>{text(what)}</p>"), 404)

    async def runs(request: Any) -> Response:
        return html(pages.runs_page(find_runs(roots, settings.reviews_dir)))

    async def run(request: Any) -> Response:
        try:
            found = load_run(roots, request.path_params["key"], settings.reviews_dir)
        except KeyError:
            return not_found("no such run")
        return html(pages.run_page(found, dict(request.query_params)))

    async def item(request: Any) -> Response:
        try:
            found = load_run(roots, request.path_params["key"], settings.reviews_dir)
        except KeyError:
            return not_found("no such run")
        nodeid = request.query_params.get("nodeid", "")
        record = next((r for r in found.records if r.get("nodeid") == nodeid), None)
        if record is None:
            return not_found(f"no item {nodeid} in this run")
        from .review_routes import item_page

        return html(item_page(roots, settings.reviews_dir, found, record, request.query_params))

    async def label(request: Any) -> Response:
        from .review_routes import post_label

        try:
            found = load_run(roots, request.path_params["key"], settings.reviews_dir)
        except KeyError:
            return not_found("no such run")
        raw = (await request.body()).decode("utf-8", errors="replace")
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(raw, keep_blank_values=True).items()}
        where, body, status = post_label(roots, settings.reviews_dir, found, form)
        if where:
            return RedirectResponse(where, status_code=303)
        return html(body, status)

    async def review(request: Any) -> Response:
        from .review_routes import queue_page

        params = dict(request.query_params)
        if "key" in request.path_params:
            params["run"] = request.path_params["key"]
        return html(queue_page(roots, settings.reviews_dir, params))

    async def calibration(request: Any) -> Response:
        from .review_routes import calibration_page

        return html(calibration_page(roots, settings.reviews_dir))

    async def trends(request: Any) -> Response:
        from .trends import trends_of_roots

        return html(trends_of_roots(roots, settings.reviews_dir, request.query_params))

    async def file(request: Any) -> Response:
        try:
            found = load_run(roots, request.path_params["key"], settings.reviews_dir)
        except KeyError:
            return not_found("no such run")
        name = request.path_params["name"]
        if name not in SERVED_FILES:
            return not_found("not a file the viewer serves")
        path = found.folder / name
        return FileResponse(path) if path.is_file() else not_found(f"no {name} yet")

    async def compare(request: Any) -> Response:
        from .compare import compare_page

        params = request.query_params
        try:
            baseline = load_run(roots, params.get("a", ""), settings.reviews_dir)
            new = load_run(roots, params.get("b", ""), settings.reviews_dir)
        except KeyError:
            body = '<p class="bad">Pick two runs on the runs page (a: baseline, b: new).</p>'
            return html(pages.layout("Compare", body), 400)
        return html(compare_page(baseline, new, params.get("model", "")))

    async def launch(request: Any) -> Response:
        error = ""
        if request.method == "POST":
            # A plain urlencoded form, parsed here: no multipart parser to install.
            raw = (await request.body()).decode("utf-8", errors="replace")
            parsed = urllib.parse.parse_qs(raw, keep_blank_values=True)
            fields: dict[str, Any] = {key: values[-1] for key, values in parsed.items()}
            fields["files"] = parsed.get("files", [])
            try:
                queue.submit(parse_launch(fields, settings.project))
            except LaunchError as exc:
                error = str(exc)
            else:
                return RedirectResponse("/launch", status_code=303)
        from .compare import launch_page

        files = eval_files(settings.project)
        return html(launch_page(files, queue.snapshot(), error), 400 if error else 200)

    async def cancel(request: Any) -> Response:
        queue.cancel(int(request.path_params["job"]))
        return RedirectResponse("/launch", status_code=303)

    app = Starlette(
        middleware=[Middleware(_LocalOnly, allowed=settings.allowed_hosts)],
        routes=[
            Route("/", runs),
            Route("/run/{key:path}/item", item),
            Route("/run/{key:path}/label", label, methods=["POST"]),
            Route("/run/{key:path}/review", review),
            Route("/review", review),
            Route("/calibration", calibration),
            Route("/trends", trends),
            Route("/file/{key:path}/{name}", file),
            Route("/run/{key:path}", run),
            Route("/compare", compare),
            Route("/launch", launch, methods=["GET", "POST"]),
            Route("/launch/{job:int}/cancel", cancel, methods=["POST"]),
        ],
        lifespan=_closing(queue),
    )
    app.state.queue = queue
    return app


class _LocalOnly:
    """Requests addressed to this machine only, and forms posted from the viewer's own pages.

    A page elsewhere can make a browser send requests to 127.0.0.1: a Host other than ours
    (DNS rebinding) and a POST whose Origin is another site (a forged form that would launch
    runs and spend money) are refused with 403.
    """

    def __init__(self, app: Any, allowed: Sequence[str]) -> None:
        self.app = app
        self.allowed = set(allowed)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._trusted(scope):
            from starlette.responses import PlainTextResponse

            response = PlainTextResponse("llmbench view: refused (not a local request)", 403)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _trusted(self, scope: Any) -> bool:
        headers = {
            key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]
        }
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if "*" not in self.allowed and name not in self.allowed:
            return False
        origin = headers.get("origin")
        if scope["method"] == "POST" and origin is not None:
            return origin in (f"http://{host}", f"https://{host}")
        return True


def _closing(queue: JobQueue) -> Any:
    import contextlib

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        queue.close()

    return lifespan


def serve(settings: ViewSettings, host: str, port: int) -> None:
    """Serve until interrupted; print the address once listening."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # from now on a connection waits for the server instead of being refused
    config = uvicorn.Config(create_app(settings), log_level="warning", lifespan="on")
    bound = sock.getsockname()[1]
    print(f"llmbench view: http://{host}:{bound}/  (Ctrl-C to stop)", flush=True)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])

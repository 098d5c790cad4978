"""What exporting a run's OpenTelemetry spans costs: wall time with ``--otel`` beside without.

    .venv/bin/python benchmarks/otel_overhead.py [--n 400] [--concurrency 32] [--pairs 5]
        [--workers 0] [--write benchmarks/otel-overhead.md]

One suite of ``--n`` plain cases against the benchmark's fake OpenAI-compatible server
(``fakeserver.py``, 0.25 s to the first token) runs in turn without export (A) and with
``--otel`` into an OTLP/HTTP receiver on 127.0.0.1 (B), A B A B, ``--pairs`` times, each run a
whole ``python -m pytest`` process with ``--cache=off``. The receiver decodes every export
request (``opentelemetry-proto``) and counts the spans, so a B run that lost spans is seen. The
figure is the ratio B / A of each pair and their median (target: under 1.05).

"Zero with it off" is checked apart: one run of each kind inside a Python process that then says
whether any ``opentelemetry`` module was imported (never without ``--otel``), and that the off
run's records carry no ``trace``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from harness import (
    FakeServer,
    ServerOptions,
    bench_env,
    count_records,
    pytest_argv,
    run_bounded,
    write_suite,
)

_PROBE = (
    "import sys, pytest\n"
    "code = pytest.main(sys.argv[1:])\n"
    "print('OTEL-IMPORTED', any(m.split('.')[0] == 'opentelemetry' for m in sys.modules))\n"
    "sys.exit(int(code))\n"
)


class _Receiver(BaseHTTPRequestHandler):
    """POST /v1/traces: decodes the request and counts its spans."""

    spans = 0
    requests = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        count = sum(
            len(scope.spans)
            for resource in request.resource_spans
            for scope in resource.scope_spans
        )
        with _Receiver.lock:
            _Receiver.spans += count
            _Receiver.requests += 1
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def receiver() -> Iterator[str]:
    """An OTLP/HTTP receiver on 127.0.0.1 for the ``with`` block; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _taken() -> tuple[int, int]:
    with _Receiver.lock:
        counts = (_Receiver.spans, _Receiver.requests)
        _Receiver.spans = _Receiver.requests = 0
    return counts


def _argv(root: Path, out: Path, args: argparse.Namespace, otel: bool) -> list[str]:
    extra = [f"--concurrency={args.concurrency}", "--cache=off", "-p", "no:randomly"]
    return pytest_argv(root, out, args.workers, extra + (["--otel"] if otel else []))


def _env(endpoint: str | None) -> dict[str, str]:
    env = bench_env()
    for name in [name for name in env if name.startswith("OTEL_")]:
        del env[name]
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    return env


def measure(args: argparse.Namespace, work: Path) -> dict[str, object]:
    """The A B pairs and the import probe; every figure of the Markdown."""
    pairs: list[dict[str, float | int]] = []
    with FakeServer(ServerOptions(), work) as server, receiver() as endpoint:
        root = write_suite(work / "suite", args.n, server.api_base, salt="otel")
        for index in range(args.pairs):
            row: dict[str, float | int] = {}
            for label, otel in (("off", False), ("on", True)):
                out = work / f"out-{index}-{label}"
                run = run_bounded(
                    _argv(root, out, args, otel), root, _env(endpoint if otel else None), 600
                )
                records, outcomes = count_records(out)
                spans, requests = _taken()
                if run.returncode != 0 or records != args.n:
                    raise SystemExit(f"run {label} {index} failed: {outcomes}\n{run.tail()}")
                row[f"{label}_s"] = run.wall_s
                row[f"{label}_cpu_s"] = run.cpu_s
                row[f"{label}_spans"] = spans
                row[f"{label}_exports"] = requests
            row["ratio"] = float(row["on_s"]) / float(row["off_s"])
            pairs.append(row)
            print(json.dumps(row), flush=True)
        probe = {
            label: _probe(root, work / f"probe-{label}", args, endpoint if otel else None, otel)
            for label, otel in (("off", False), ("on", True))
        }
    return {"pairs": pairs, "probe": probe}


def _probe(
    root: Path, out: Path, args: argparse.Namespace, endpoint: str | None, otel: bool
) -> dict[str, object]:
    argv = _argv(root, out, args, otel)
    argv[1:3] = ["-c", _PROBE]  # pytest.main in this process, then the import question
    done = subprocess.run(argv, cwd=root, env=_env(endpoint), capture_output=True, text=True)
    imported = "OTEL-IMPORTED True" in done.stdout
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    traced = sum(1 for line in lines if json.loads(line).get("trace"))
    _taken()
    return {"exit": done.returncode, "otel_imported": imported, "records_with_trace": traced}


def markdown(args: argparse.Namespace, found: dict[str, object]) -> str:
    pairs = found["pairs"]
    assert isinstance(pairs, list)
    ratios = [float(row["ratio"]) for row in pairs]
    median = statistics.median(ratios)
    lines = [
        "# OpenTelemetry export: overhead",
        "",
        f"`.venv/bin/python benchmarks/otel_overhead.py --n {args.n} --concurrency "
        f"{args.concurrency} --pairs {args.pairs} --workers {args.workers}`: {args.n} plain "
        "cases against the benchmark's fake server (0.25 s to the first token), each run a whole "
        "pytest process with `--cache=off`, without export (off) and with `--otel` into an "
        "OTLP/HTTP receiver on 127.0.0.1 that decodes every request (on), in turn.",
        "",
        "| pair | off (s) | on (s) | on / off | CPU off (s) | CPU on (s) | spans received | "
        "export requests |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for number, row in enumerate(pairs, 1):
        lines.append(
            f"| {number} | {float(row['off_s']):.2f} | {float(row['on_s']):.2f} | "
            f"{float(row['ratio']):.3f} | {float(row['off_cpu_s']):.2f} | "
            f"{float(row['on_cpu_s']):.2f} | {row['on_spans']} | {row['on_exports']} |"
        )
    verdict = "met" if median < 1.05 else "NOT met"
    lines += [
        "",
        f"Median on / off: **{median:.3f}** (target under 1.05: {verdict}); "
        f"spans received by an off run: {sum(int(row['off_spans']) for row in pairs)}.",
        "",
        "With export off: " + _probe_words(found["probe"]),
        "",
    ]
    return "\n".join(lines)


def _probe_words(probe: object) -> str:
    assert isinstance(probe, dict)
    off, on = probe["off"], probe["on"]
    return (
        f"a run without `--otel` imported OpenTelemetry: {off['otel_imported']}, and "
        f"{off['records_with_trace']} of its records carry a `trace`; the same run with "
        f"`--otel` imported it: {on['otel_imported']}, {on['records_with_trace']} records traced."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--workers", default="0")
    parser.add_argument("--write", type=Path, help="write the Markdown here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="otel-bench-") as tmp:
        found = measure(args, Path(tmp))
    text = markdown(args, found)
    print(text)
    if args.write:
        args.write.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""An eval file's ``post_process`` command: extra scores computed after an agent item ran.

The command (``post_process: "python3 score.py {results}"``) gets ``{results}`` replaced by the
path of a JSON file describing the item (answer, workdir, turns, tool counts, transcript). It is
the user's own scorer, as in aster-bench's post-processing hook; its standard output must end
with one JSON object, whose numbers and booleans become the record's ``metrics``.

It never runs anything the agent could have written, and never with a secret: it starts in the
eval file's own folder (so ``score.py`` is the file beside the eval, not one the agent wrote), in
the agents' sandbox (:mod:`.sandbox`) with the workdir, that folder and the results file
read-only, ``.env`` files there hidden, and the allowlisted environment (no provider key). Where
bubblewrap does not work it runs only under the eval's ``sandbox: off``, as agent commands do.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .limits import SandboxLimits
from .sandbox import Sandbox

#: What a post-processing command may use: more than an agent's command, for a real scorer.
POST_PROCESS_LIMITS = SandboxLimits(
    timeout_s=300.0, cpu_s=300, memory_mb=4096, max_output_bytes=1_000_000
)
POST_PROCESS_TIMEOUT_S = POST_PROCESS_LIMITS.timeout_s
_SHOWN = 300


class PostProcessError(Exception):
    """The command failed, timed out, could not run, or printed no JSON object."""


def run_post_process(
    command: str,
    workdir: Path,
    payload: dict[str, Any],
    *,
    eval_dir: Path,
    mode: str = "auto",
    hidden: Sequence[Path] = (),
) -> dict[str, float]:
    """Run ``command`` on ``payload`` from ``eval_dir``, confined; return the numeric fields of
    the JSON object it prints. ``hidden``: more files the command must not read."""
    with tempfile.TemporaryDirectory(prefix="llmbench-post-") as folder:
        results = Path(folder) / "llmbench-item.json"
        results.write_text(json.dumps(payload, ensure_ascii=False, default=str), encoding="utf-8")
        line = command.replace("{results}", shlex.quote(str(results)))
        sandbox = Sandbox(
            workdir,
            POST_PROCESS_LIMITS,
            mode,
            path_prefix=(Path(sys.executable).parent,),
            writable=False,
            read_only=(eval_dir, Path(folder)),
            hidden=env_files(eval_dir, hidden),
            cwd=eval_dir,
        )
        done = sandbox.run(line)
    if done.error is not None:
        raise PostProcessError(f"{command!r} could not run: {done.error}")
    if done.timed_out:
        raise PostProcessError(f"{command!r} ran past {POST_PROCESS_TIMEOUT_S:g} s")
    if done.exit_code != 0:
        tail = (done.stderr or done.stdout).strip()[-_SHOWN:]
        raise PostProcessError(f"{command!r} exited with {done.exit_code}: {tail}")
    return _scores(command, done.stdout)


def env_files(folder: Path, more: Sequence[Path]) -> list[Path]:
    """The ``.env`` files (``.env``, ``.env.local``, ...) directly in ``folder``, and those of
    ``more`` inside it."""
    root = folder.resolve()
    inside = [p.resolve() for p in more if p.resolve().is_relative_to(root) and p.is_file()]
    found = [path.resolve() for path in folder.glob(".env*") if path.is_file()]
    return sorted(set(found + inside))


def _scores(command: str, output: str) -> dict[str, float]:
    """The last line of ``output`` that is a JSON object (or all of it), as numbers."""
    candidates = [output.strip(), *reversed(output.strip().splitlines())]
    for text in candidates:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            return {
                str(key): float(number)
                for key, number in value.items()
                if isinstance(number, (int, float))
            }
    shown = output.strip()[-_SHOWN:] or "nothing"
    raise PostProcessError(f"{command!r} printed no JSON object (got {shown!r})")

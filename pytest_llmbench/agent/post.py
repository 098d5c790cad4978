"""An eval file's ``post_process`` command: extra scores computed after an agent item ran.

The command (``post_process: "python3 score.py {results}"``) runs in the item's workdir with
``{results}`` replaced by the path of a JSON file describing the item (answer, workdir, turns,
tool counts, transcript). It is the user's own scorer, as in aster-bench's post-processing hook,
so it runs with the user's environment, outside the agent sandbox. Its standard output must end
with one JSON object; its numbers and booleans become the record's ``metrics``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

#: Seconds a post-processing command may take.
POST_PROCESS_TIMEOUT_S = 300.0
_SHOWN = 300


class PostProcessError(Exception):
    """The command failed, timed out, or printed no JSON object."""


def run_post_process(command: str, workdir: Path, payload: dict[str, Any]) -> dict[str, float]:
    """Run ``command`` on ``payload``; return the numeric fields of the JSON object it prints."""
    results = workdir.parent / "llmbench-item.json"
    results.write_text(json.dumps(payload, ensure_ascii=False, default=str), encoding="utf-8")
    line = command.replace("{results}", shlex.quote(str(results)))
    try:
        done = subprocess.run(
            line,
            shell=True,
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=POST_PROCESS_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise PostProcessError(f"{command!r} ran past {POST_PROCESS_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-_SHOWN:]
        raise PostProcessError(f"{command!r} exited with {done.returncode}: {tail}")
    return _scores(command, done.stdout)


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

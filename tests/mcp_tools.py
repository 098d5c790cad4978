"""The tools several stdio MCP test servers share, as source text: a test writes its server's
own part (its imports, ``app = MCPServer(...)`` and its own tools) and :func:`server` appends the
shared tools it names, then ``app.run()``. Each tool imports what it uses.

:func:`virtualenv` installs such servers the way users do, in a virtualenv of their own with a
console script in its ``bin/``; :data:`NODE_SERVER` is a stdio server for Node, without
dependencies, for the npx cache's layout."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

_TOOLS: dict[str, str] = {
    "hunt": '''
@app.tool()
def hunt(name: str) -> str:
    """The digests of NAME=... in every /proc/*/environ this process can read."""
    import hashlib
    import os

    found, read = set(), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                environ = file.read()
        except OSError:
            continue
        read += 1
        for pair in environ.split(b"\\0"):
            if pair.startswith(name.encode() + b"="):
                found.add(hashlib.sha256(pair.split(b"=", 1)[1]).hexdigest())
    return f"read {read}: " + (", ".join(sorted(found)) or "none")
''',
    "peek": '''
@app.tool()
def peek(path: str) -> str:
    """The text of a file, or why it cannot be read."""
    try:
        with open(path) as file:
            return file.read()
    except OSError as exc:
        return f"cannot read: {type(exc).__name__}"
''',
    "dial": '''
@app.tool()
def dial(port: int) -> str:
    """Connect to 127.0.0.1:port; say whether it worked."""
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return "connected"
    except OSError as exc:
        return f"cannot connect: {type(exc).__name__}"
''',
    "where": '''
@app.tool()
def where() -> str:
    """The folder the server runs in."""
    import os

    return os.getcwd()
''',
    "die": '''
@app.tool()
def die() -> str:
    """Exits the server at once."""
    import os

    os._exit(1)
''',
    "nap": '''
@app.tool()
def nap(seconds: float) -> str:
    """Sleeps, then says so."""
    import time

    time.sleep(seconds)
    return "woke up"
''',
    "scribble": '''
@app.tool()
def scribble(path: str) -> str:
    """Write a file; say whether it worked."""
    try:
        with open(path, "w") as file:
            file.write("scribbled")
        return "written"
    except OSError as exc:
        return f"cannot write: {type(exc).__name__}: {exc.strerror}"
''',
    "fill": '''
@app.tool()
def fill(entries: int) -> str:
    """Creates that many empty files in its folder, then sleeps."""
    import time

    for n in range(entries):
        open(f"f{n}", "w").close()
    time.sleep(60)
    return "filled"
''',
}


def server(own: str, *tools: str) -> str:
    """A test server's source: ``own``, then the shared ``tools`` it names, then ``app.run()``."""
    return own + "".join(f"\n{_TOOLS[name]}" for name in tools) + "\n\napp.run()\n"


def virtualenv(root: Path, modules: dict[str, str], scripts: dict[str, str]) -> Path:
    """A virtualenv at ``root`` (``python -m venv``, on the Python running the tests) holding
    ``modules`` (name: source) in its own site-packages and a console script, as pip writes
    one, for each of ``scripts`` (script name: module to run). Its dependencies (the MCP SDK,
    ``mcp-server-time``) come from this project's virtualenv, through a ``.pth`` file: no
    download. Returns its ``bin/``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = root / "lib" / version / "site-packages"
    (site / "llmbench-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)
    for name, module in scripts.items():
        script = root / "bin" / name
        script.write_text(_CONSOLE_SCRIPT.format(python=root / "bin" / "python", module=module))
        script.chmod(0o755)
    return root / "bin"


_CONSOLE_SCRIPT = """#!{python}
import re
import sys
from {module} import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""

#: A stdio MCP server for Node (newline-delimited JSON-RPC, no SDK): ``whereami`` says which
#: node runs which file after reserving 512 MB (not touched: address space, as Node servers
#: with their dependencies take), ``peek`` reads a file. It starts ``#!/usr/bin/env node``.
NODE_SERVER = r"""#!/usr/bin/env node
const fs = require("fs");
const readline = require("readline");
const tools = [
  {name: "whereami", description: "Which node runs which file.",
   inputSchema: {type: "object", properties: {}}},
  {name: "peek", description: "The text of a file, or why it cannot be read.",
   inputSchema: {type: "object", properties: {path: {type: "string"}}, required: ["path"]}},
];
function call(name, args) {
  if (name === "whereami") {
    const reserved = Buffer.allocUnsafe(512 * 1024 * 1024);
    return `${process.execPath} ${fs.realpathSync(__filename)} ${reserved.length >> 20} MB`;
  }
  try { return fs.readFileSync(args.path, "utf8"); } catch (e) { return `cannot read: ${e.code}`; }
}
function answer(id, result) { process.stdout.write(JSON.stringify({jsonrpc: "2.0", id, result}) + "\n"); }
readline.createInterface({input: process.stdin}).on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.id === undefined) return;  // a notification
  if (msg.method === "initialize") {
    answer(msg.id, {protocolVersion: msg.params.protocolVersion, capabilities: {tools: {}},
                    serverInfo: {name: "node-probe", version: "1.0.0"}});
  } else if (msg.method === "tools/list") {
    answer(msg.id, {tools});
  } else if (msg.method === "tools/call") {
    answer(msg.id, {content: [{type: "text", text: call(msg.params.name, msg.params.arguments)}]});
  } else {
    process.stdout.write(JSON.stringify({jsonrpc: "2.0", id: msg.id,
      error: {code: -32601, message: "no such method"}}) + "\n");
  }
});
"""

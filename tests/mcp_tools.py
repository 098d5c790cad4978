"""The tools several stdio MCP test servers share, as source text: a test writes its server's
own part (its imports, ``app = MCPServer(...)`` and its own tools) and :func:`server` appends the
shared tools it names, then ``app.run()``. Each tool imports what it uses."""

from __future__ import annotations

_TOOLS: dict[str, str] = {
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

#!/usr/bin/env python3
"""A small MCP server over stdio for deerflow's tests (Python standard library only).

Environment knobs:
  MCP_MODE   "crash": exit 1 at start; "hang": never answer initialize;
             "stubborn": ignore SIGTERM and the end of stdin (only SIGKILL stops it)
  MCP_TOOLS  comma-separated subset of the tools below (default: all)
  MCP_PAGE   tools per tools/list page (default: all on one page; exercises nextCursor)
  MCP_LOG    a file that gets one line per message received ("pid N" first)
"""
import json
import os
import signal
import sys
import threading
import time

LOG = os.environ.get("MCP_LOG")
lock = threading.Lock()


def log(line):
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def obj(props, required=()):
    return {"type": "object", "properties": props, "required": list(required)}


TOOLS = {
    "echo": ("Echoes its text", obj({"text": {"type": "string"}}, ["text"])),
    "sleep": ("Sleeps for some seconds", obj({"seconds": {"type": "number"}}, ["seconds"])),
    "fail": ("Always fails", obj({})),
    "image": ("Returns a small PNG and a resource", obj({})),
    "big": ("Returns N characters", obj({"n": {"type": "integer"}}, ["n"])),
    "env": ("Reads an environment variable", obj({"name": {"type": "string"}}, ["name"])),
    "structured": ("Returns only structured content", obj({})),
    "read_file": ("Clashes with a built-in when not prefixed", obj({})),
}


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def call(name, args):
    if name == "echo":
        return text(args.get("text", ""))
    if name == "sleep":
        time.sleep(float(args.get("seconds", 1)))
        return text("slept")
    if name == "fail":
        return {"content": [{"type": "text", "text": "it broke"}], "isError": True}
    if name == "image":
        return {"content": [
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///tmp/r.txt", "text": "x"}},
        ]}
    if name == "big":
        return text("x" * int(args.get("n", 10)))
    if name == "env":
        return text(os.environ.get(args.get("name", ""), "(unset)"))
    if name == "structured":
        return {"content": [], "structuredContent": {"answer": 42}}
    return text("ok")


def main():
    log("pid %d" % os.getpid())
    mode = os.environ.get("MCP_MODE", "")
    if mode == "crash":
        sys.stderr.write("test server: crashing on purpose\n")
        sys.exit(1)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    names = [n for n in os.environ.get("MCP_TOOLS", ",".join(TOOLS)).split(",") if n]
    page = int(os.environ.get("MCP_PAGE", "0")) or len(names) or 1
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        log(json.dumps(msg) if method == "notifications/cancelled" else str(method))
        if mode == "hang":
            continue
        if "id" not in msg:
            continue
        mid, params = msg["id"], msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": params.get("protocolVersion", "2025-03-26"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "deerflow-test-server", "version": "1"},
            }})
        elif method == "tools/list":
            start = int(params.get("cursor") or 0)
            chunk = names[start:start + page]
            result = {"tools": [
                {"name": n, "description": TOOLS[n][0], "inputSchema": TOOLS[n][1]} for n in chunk
            ]}
            if start + page < len(names):
                result["nextCursor"] = str(start + page)
            send({"jsonrpc": "2.0", "id": mid, "result": result})
        elif method == "tools/call":
            def work(mid=mid, params=params):
                send({"jsonrpc": "2.0", "id": mid,
                      "result": call(params.get("name"), params.get("arguments") or {})})
            threading.Thread(target=work, daemon=True).start()
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
    if mode == "stubborn":
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main()

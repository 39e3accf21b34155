#!/usr/bin/env python3
"""A small MCP server over stdio for deerflow's tests (Python standard library only).

Environment knobs:
  MCP_MODE   "crash": exit 1 at start; "hang": never answer initialize;
             "stubborn": ignore SIGTERM and the end of stdin (only SIGKILL stops it)
  MCP_TOOLS  comma-separated subset of the tools below (default: all)
  MCP_PAGE   tools per tools/list page (default: all on one page; exercises nextCursor)
  MCP_LOG    a file that gets one line per message received ("pid N" first)
With --http it serves streamable HTTP on 127.0.0.1 instead, printing its port first.
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


def answer(msg, names, page):
    """The response to one request (None for a notification)."""
    if "id" not in msg:
        return None
    mid, method, params = msg["id"], msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-03-26"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "deerflow-test-server", "version": "1"},
        }}
    if method == "tools/list":
        start = int(params.get("cursor") or 0)
        chunk = names[start:start + page]
        result = {"tools": [
            {"name": n, "description": TOOLS[n][0], "inputSchema": TOOLS[n][1]} for n in chunk
        ]}
        if start + page < len(names):
            result["nextCursor"] = str(start + page)
        return {"jsonrpc": "2.0", "id": mid, "result": result}
    if method == "tools/call":
        return {"jsonrpc": "2.0", "id": mid,
                "result": call(params.get("name"), params.get("arguments") or {})}
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}}


def serve_http(names, page):
    """Streamable HTTP: POST a message, get its JSON answer (202 for a notification)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            msg = json.loads(body)
            log("%s %s" % (msg.get("method"), self.headers.get("X-Test-Key", "-")))
            reply = answer(msg, names, page)
            if reply is None:
                self.send_response(202)
                self.end_headers()
                return
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if msg.get("method") == "initialize":
                self.send_header("Mcp-Session-Id", "test-session")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.send_response(405)
            self.end_headers()

        def do_DELETE(self):
            self.send_response(200)
            self.end_headers()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sys.stdout.write("%d\n" % httpd.server_address[1])
    sys.stdout.flush()
    httpd.serve_forever()


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
    if "--http" in sys.argv:
        serve_http(names, page)
        return
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        log(json.dumps(msg) if method == "notifications/cancelled" else str(method))
        if mode == "hang":
            continue
        if method == "tools/call":
            threading.Thread(target=lambda m=msg: send(answer(m, names, page)), daemon=True).start()
            continue
        reply = answer(msg, names, page)
        if reply is not None:
            send(reply)
    if mode == "stubborn":
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main()

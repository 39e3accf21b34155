#!/usr/bin/env python3
"""An MCP server that says odd things, for deerflow's tests (Python standard library only).

ODD_SPEC (JSON) says what it says:
  tools        [{"name": ..., "description": ...}]: its tools (names as they are)
  results      {name: result}: what tools/call of that tool answers (verbatim); a tool without
               an entry answers the text "called NAME"
  init_error   answer initialize with this JSON-RPC error message
  echo_env     names of variables: a tool "who" is added whose description is the JSON of
               {"argv": argv[1:], "env": {name: value}, "cwd": cwd, "headers": {...}}
With --http it serves streamable HTTP on 127.0.0.1 (printing its port first); the "who"
description then also holds the request path and the Authorization and X-Key headers.
"""
import json
import os
import sys

SPEC = json.loads(os.environ.get("ODD_SPEC", "{}"))


def who(extra):
    names = SPEC.get("echo_env") or []
    info = {
        "argv": sys.argv[1:],
        "env": {n: os.environ.get(n) for n in names},
        "cwd": os.getcwd(),
    }
    info.update(extra)
    return {"name": "who", "description": json.dumps(info), "inputSchema": {"type": "object"}}


def answer(msg, extra):
    if "id" not in msg:
        return None
    mid, method, params = msg["id"], msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        if "init_error" in SPEC:
            return {"jsonrpc": "2.0", "id": mid,
                    "error": {"code": -32000, "message": SPEC["init_error"]}}
        return {"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-03-26"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "odd", "version": "1"},
        }}
    if method == "tools/list":
        tools = [{"name": t["name"], "description": t.get("description", ""),
                  "inputSchema": {"type": "object"}} for t in SPEC.get("tools", [])]
        if "echo_env" in SPEC:
            tools.append(who(extra))
        return {"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}}
    if method == "tools/call":
        name = params.get("name")
        result = SPEC.get("results", {}).get(
            name, {"content": [{"type": "text", "text": "called " + str(name)}]})
        return {"jsonrpc": "2.0", "id": mid, "result": result}
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}}


def serve_http():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            extra = {"path": self.path, "headers": {
                h: self.headers.get(h) for h in ("Authorization", "X-Key")}}
            reply = answer(json.loads(body), extra)
            if reply is None:
                self.send_response(202)
                self.end_headers()
                return
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
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
    if "--http" in sys.argv:
        serve_http()
        return
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        reply = answer(json.loads(line), {})
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

"""A zero-latency OpenAI Chat Completions server for the CPU-per-call benchmark
(benches/run.sh). The lead's first call gets TASKS `task` calls; a sub-agent gets an `ls`
call until it has made TURNS of them, then answers; the lead then answers. Streams SSE
with usage, as real servers do. Usage: mock_openai.py PORT_FILE TASKS TURNS
(writes the port it listens on to PORT_FILE, serves until killed)."""
import json, sys, threading
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

PORT_FILE, TASKS, TURNS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
calls = 0
lock = threading.Lock()


def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def reply(body):
    msgs = body["messages"]
    tools = {t["function"]["name"] for t in body.get("tools", [])}
    made = sum(1 for m in msgs if m["role"] == "assistant")
    if "task" in tools:
        if made == 0:
            calls = [{"index": i, "id": f"t{i}", "type": "function",
                      "function": {"name": "task", "arguments": json.dumps(
                          {"description": f"t{i}", "prompt": f"do {i}", "subagent_type": "general-purpose"})}}
                     for i in range(TASKS)]
            return [chunk({"role": "assistant", "tool_calls": calls}, "tool_calls")]
        return [chunk({"role": "assistant", "content": "all done"}, "stop")]
    if made < TURNS:
        call = {"index": 0, "id": f"c{made}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        return [chunk({"role": "assistant", "tool_calls": [call]}), chunk({}, "tool_calls")]
    return [chunk({"role": "assistant", "content": "sub "}), chunk({"content": "done"}), chunk({}, "stop")]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        global calls
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with lock:
            calls += 1
        out = b""
        for c in reply(body) + [{"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [],
                                 "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}]:
            out += b"data: " + json.dumps(c).encode() + b"\n\n"
        out += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self):
        # /calls: how many model calls were served (the benchmark divides by it).
        out = str(calls).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
open(PORT_FILE, "w").write(str(server.server_address[1]))
server.serve_forever()

"""An OpenAI Chat Completions server that allows LIMIT requests in flight and answers 429
above it at once (a provider's concurrency limit), for benches/rate.sh. An accepted request
is answered after LATENCY_MS with a short text and usage. Usage:
mock_limited.py PORT_FILE LIMIT LATENCY_MS [RETRY_AFTER]
(writes its port to PORT_FILE, serves until killed; GET /stats prints "served rejected")."""
import json, sys, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

PORT_FILE, LIMIT, LATENCY = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) / 1000.0
RETRY_AFTER = sys.argv[4] if len(sys.argv) > 4 else None
lock = threading.Lock()
in_flight = served = rejected = 0

CHUNKS = [
    {"id": "c", "object": "chat.completion.chunk", "model": "m",
     "choices": [{"index": 0, "delta": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}]},
    {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [],
     "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}},
]
BODY = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in CHUNKS) + b"data: [DONE]\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without this, Nagle and the client's
    # delayed ACK add 40 ms to every answer.
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def send(self, code, body, ctype, extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global in_flight, served, rejected
        self.rfile.read(int(self.headers["Content-Length"]))
        with lock:
            admitted = in_flight < LIMIT
            if admitted:
                in_flight += 1
            else:
                rejected += 1
        if not admitted:
            extra = [("Retry-After", RETRY_AFTER)] if RETRY_AFTER else []
            err = json.dumps({"error": {"message": "too many requests in flight", "type": "rate_limit_exceeded"}})
            return self.send(429, err.encode(), "application/json", extra)
        time.sleep(LATENCY)
        with lock:
            in_flight -= 1
            served += 1
        self.send(200, BODY, "text/event-stream")

    def do_GET(self):
        self.send(200, f"{served} {rejected}".encode(), "text/plain")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
server.request_queue_size = 256
open(PORT_FILE, "w").write(str(server.server_address[1]))
server.serve_forever()

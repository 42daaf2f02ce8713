"""A Pyroscope stand-in for the benchmarks: takes every push on loopback,
answers 200 and keeps nothing; with a second argument, writes the number of
pushes received so far to that file.

usage: stub_pyroscope.py PORT [COUNT_FILE]"""
import http.server
import sys
import threading

count, lock = [0], threading.Lock()
count_file = sys.argv[2] if len(sys.argv) > 2 else None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if count_file:
            with lock:
                count[0] += 1
                with open(count_file, "w") as f:
                    f.write(str(count[0]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()

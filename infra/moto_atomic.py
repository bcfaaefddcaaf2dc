"""moto_server with atomic requests.

moto evaluates a DynamoDB condition and applies the write without a lock, so
two concurrent conditional writes can both succeed: real DynamoDB never lets
that happen, and the lock tests (5 contenders, one holder) catch it. This
launcher runs moto's own WSGI app with every request serialised, except SQS
ReceiveMessage, whose long polls must not block the other requests.

Usage: python3 infra/moto_atomic.py -H 127.0.0.1 -p PORT
"""
import argparse
import os
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


class Serialised:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target.endswith(".ReceiveMessage"):
            return self.app(environ, start_response)
        with self.lock:
            # Consume the body inside the lock: moto's response is complete here.
            return list(self.app(environ, start_response))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-H", "--host", default="127.0.0.1")
    p.add_argument("-p", "--port", type=int, required=True)
    a = p.parse_args()
    os.environ.setdefault("MOTO_PORT", str(a.port))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(a.host, a.port, Serialised(app), threaded=True, use_reloader=False)


if __name__ == "__main__":
    main()

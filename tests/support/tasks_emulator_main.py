"""Start gcloud-tasks-emulator listening on 127.0.0.1 only.

Run with the emulator's own interpreter (``.venv-emulators``, see ``.ci/run``): its CLI
binds gRPC on every interface, which the tests must not do. Everything else (queue state,
dispatch, retries, ``--max-retries``) is the emulator's own code.
"""

import argparse
import time
from concurrent import futures

import grpc
from gcloud_tasks_emulator import server
from gcloud_tasks_emulator.cloudtasks_pb2_grpc import add_CloudTasksServicer_to_server


def _serve_on_loopback(self):  # replaces APIThread.run: same server, loopback address
    self._httpd = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_CloudTasksServicer_to_server(server.Greeter(self._state), self._httpd)
    self._httpd.add_insecure_port(f"127.0.0.1:{self._port}")
    self._httpd.start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-retries", type=int, default=-1)
    args = parser.parse_args()
    server.APIThread.run = _serve_on_loopback
    emulator = server.create_server(
        "127.0.0.1", args.port, "127.0.0.1", 9, [], max_retries=args.max_retries
    )
    emulator.start()
    print(f"ready on 127.0.0.1:{args.port}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()

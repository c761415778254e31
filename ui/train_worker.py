"""One training job's process: `python -m ui.train_worker FD`, started by `ui.jobs.Job`.

Training runs here rather than in a thread of the Streamlit server: a small model's training step is
mostly Python overhead, so a training thread would hold the server's interpreter lock and every
student's page would wait for it. A separate interpreter (about 1 s to start) shares nothing with the
server but the connection on file descriptor FD:

- server -> worker: the job's spec (a dict, see `Job._run`), then optionally ("stop",);
- worker -> server: the messages listed in `ui.jobs.worker`, ending with ("end", ...).

The worker runs at a lower CPU priority with one torch thread. When the server goes away the
connection closes, the worker stops after its current step and exits.
"""

from __future__ import annotations

import os
import sys
import threading
from multiprocessing.connection import Connection


def main() -> None:
    from ui.jobs import NICE, worker

    os.nice(NICE)  # before any other thread starts: on Linux each thread has its own priority, new ones inherit it
    conn = Connection(int(sys.argv[1]))
    spec = conn.recv()
    stop = threading.Event()

    def listen() -> None:
        try:
            conn.recv()  # ("stop",), or EOF when the server is gone
        except (EOFError, OSError):
            pass
        stop.set()

    threading.Thread(target=listen, name="stop-listener", daemon=True).start()
    worker(conn, stop, spec)


if __name__ == "__main__":
    main()

"""Loops of plain HTTP requests from one address, in a process of their own (a flooder whose work does not slow the
measuring client): `python -m bench.http_flood URL ADDRESS LOOPS SECONDS PATH...`.

Each loop sends a request, waits for its answer (an event stream: its first bytes), and sends the next, cycling
through the paths, with `X-Forwarded-For: ADDRESS`, until SECONDS have passed or the process gets SIGTERM; it
prints how many requests were answered. Only the standard library (it starts at once). Used by
`python -m bench.class_abuse flood --kind http`. Bounded: at most 64 loops and 600 seconds, to 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time


async def http_loop(url: str, paths: list[str], address: str, stop: asyncio.Event) -> int:
    """One loop until `stop`: how many requests were answered."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    done = 0
    while not stop.is_set():
        path = paths[done % len(paths)]
        try:
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(
                f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {address}\r\nConnection: close\r\n\r\n".encode()
            )
            await writer.drain()
            await reader.read(65536 if "/events" not in path else 512)
            writer.close()
        except OSError:
            await asyncio.sleep(0.1)
            continue
        done += 1
    return done


async def flood(url: str, address: str, loops: int, seconds: float, paths: list[str]) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.call_later(seconds, stop.set)
    return sum(await asyncio.gather(*(http_loop(url, paths, address, stop) for _ in range(loops))))


def main(argv: list[str] | None = None) -> int:
    url, address, loops, seconds, *paths = argv if argv is not None else sys.argv[1:]
    if not url.startswith("http://127.0.0.1:"):
        raise SystemExit("only a server on 127.0.0.1")
    t = time.perf_counter()
    n = asyncio.run(flood(url, address, min(int(loops), 64), min(float(seconds), 600.0), paths or ["/"]))
    print(f"{n} {time.perf_counter() - t:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

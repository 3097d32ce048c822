#!/usr/bin/env python3
"""A TCP proxy that limits each connection's bandwidth, as a slow network link between the worker
and its source does: the dashboard test needs a copy that spans many scrapes of every worker pod,
and a faster machine (or a release build) must not shrink it below that.

    throttle_proxy.py --target HOST:PORT --bytes-per-second N --port-file FILE

Listens on a free loopback port, writes it to FILE, and forwards every connection to the target,
each direction of each connection limited to N bytes per second. Runs until killed.
"""
import argparse
import asyncio
import os
import time


async def pump(reader, writer, rate):
    # A token bucket of one second's worth of bytes: bursts up to `rate`, then `rate` per second.
    allowance, last = float(rate), time.monotonic()
    try:
        while True:
            data = await reader.read(min(rate, 16384))
            if not data:
                break
            now = time.monotonic()
            allowance = min(float(rate), allowance + (now - last) * rate)
            last = now
            allowance -= len(data)
            if allowance < 0:
                await asyncio.sleep(-allowance / rate)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--bytes-per-second", type=int, required=True)
    p.add_argument("--port-file", required=True)
    args = p.parse_args()
    host, port = args.target.rsplit(":", 1)

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pump(client_reader, server_writer, args.bytes_per_second),
            pump(server_reader, client_writer, args.bytes_per_second),
        )

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    listen_port = server.sockets[0].getsockname()[1]
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(listen_port))
    # Renamed into place so the caller never reads an empty file.
    os.rename(tmp, args.port_file)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())

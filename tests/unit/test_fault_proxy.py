"""The fault-injecting proxy used by partition tests: each mode behaves as documented."""

from __future__ import annotations

import asyncio

import pytest
from support.fault_proxy import Link

pytestmark = pytest.mark.unit


async def echo_server() -> tuple[asyncio.Server, int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_pass_blackhole_and_reject() -> None:
    async def main() -> None:
        server, port = await echo_server()
        link = await Link("127.0.0.1", port).start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", link.port)
            writer.write(b"hello")
            assert await asyncio.wait_for(reader.readexactly(5), 5) == b"hello"

            link.set_mode("blackhole")
            writer.write(b"lost")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(reader.readexactly(4), 0.3)
            assert link.stats.bytes_dropped >= 4

            link.set_mode("pass")
            writer.write(b"again")
            assert await asyncio.wait_for(reader.readexactly(5), 5) == b"again"

            link.set_mode("reject")  # resets the open connection...
            with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
                await asyncio.wait_for(reader.readexactly(1), 5)
            r2, _ = await asyncio.open_connection("127.0.0.1", link.port)  # ...and refuses new ones
            with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
                await asyncio.wait_for(r2.readexactly(1), 5)

            link.set_mode("pass")
            r3, w3 = await asyncio.open_connection("127.0.0.1", link.port)
            w3.write(b"healed")
            assert await asyncio.wait_for(r3.readexactly(6), 5) == b"healed"
            assert link.stats.connections == 2
            w3.close()
            with pytest.raises(ValueError):
                link.set_mode("explode")
        finally:
            await link.stop()
            server.close()

    asyncio.run(main())

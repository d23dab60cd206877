"""asyncio echo server, and a client running N concurrent connections.

  asyncio_echo.py server PORT
  asyncio_echo.py client PORT N BYTES   -> prints "ok N" when every
      connection got back exactly the BYTES random bytes it sent
"""
import asyncio
import os
import sys


async def echo(reader, writer):
    while True:
        data = await reader.read(65536)
        if not data:
            break
        writer.write(data)
        await writer.drain()
    writer.close()
    await writer.wait_closed()


async def serve(port):
    srv = await asyncio.start_server(echo, "127.0.0.1", port)
    async with srv:
        await srv.serve_forever()


async def one(port, size):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = os.urandom(size)

    async def send():
        for i in range(0, size, 4096):
            writer.write(data[i:i + 4096])
            await writer.drain()
        writer.write_eof()

    sender = asyncio.create_task(send())
    got = await reader.read(-1)  # until the server closes after our EOF
    await sender
    writer.close()
    await writer.wait_closed()
    if got != data:
        raise SystemExit(f"echo differs: sent {size} bytes, got {len(got)} back")


async def clients(port, n, size):
    await asyncio.gather(*(one(port, size) for _ in range(n)))
    print(f"ok {n}")


if __name__ == "__main__":
    if sys.argv[1] == "server":
        asyncio.run(serve(int(sys.argv[2])))
    else:
        asyncio.run(clients(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))

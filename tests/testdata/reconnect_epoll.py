"""A client that reconnects at once after its server closed a connection
a while before, and waits for each reply in epoll (tests/bells_test.go).

server ROUNDS: accepts connections one at a time; echoes ROUNDS messages
on each, each after a short pause (so that the client sleeps in epoll and
is woken by the reply), then closes the first connection first, and the
others once the client closed them.

client PORT ROUNDS: one epoll set for the run, which also holds a pipe
that nothing writes (a sleep is then the kernel's epoll_wait on the set,
woken by a bell, not a wait on the connection alone). Connection 1 makes
ROUNDS round trips; 150 ms after the server closed it, the client reads
its end, closes it and opens connection 2 at once, which makes ROUNDS
more; then it prints {"ready":1} and waits for a line on stdin before it
closes connection 2.
"""
import json
import os
import select
import socket
import sys
import time


def server(n):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    print(json.dumps({"event": "listening", "port": ls.getsockname()[1]}, separators=(",", ":")), flush=True)
    first = True
    while True:
        c, _ = ls.accept()
        for i in range(n):
            m = b""
            while len(m) < 16:
                b = c.recv(64)
                if not b:
                    raise SystemExit("client left early")
                m += b
            time.sleep(0.002)
            c.sendall(m)
        if not first:
            while c.recv(64):
                pass
        first = False
        c.close()


def rounds(ep, s, n):
    for i in range(n):
        s.sendall(b"x" * 16)
        got = b""
        while len(got) < 16:
            if not ep.poll(5):
                raise SystemExit("no reply within 5 s")
            got += s.recv(64)


def end(s):
    s.setblocking(True)
    if s.recv(64) != b"":
        raise SystemExit("bytes after the last reply")


def client(port, n):
    ep = select.epoll()
    r, w = os.pipe()
    ep.register(r, select.EPOLLIN)
    for k in range(2):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        ep.register(s.fileno(), select.EPOLLIN)
        rounds(ep, s, n)
        ep.unregister(s.fileno())
        if k == 0:
            time.sleep(0.15)
        else:
            print(json.dumps({"ready": 1}, separators=(",", ":")), flush=True)
            sys.stdin.readline()
            s.close()
            return
        end(s)
        s.close()


if sys.argv[1] == "server":
    server(int(sys.argv[2]))
else:
    client(int(sys.argv[2]), int(sys.argv[3]))

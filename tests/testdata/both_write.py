"""Both ends of a connection write a message before reading the other's.

  both_write.py server PORT BYTES
  both_write.py client PORT BYTES   -> each prints "ok" once it has sent
      its BYTES and read exactly the BYTES the other end sent

Each end writes all of its message in one blocking sendall() before it
reads anything, so the two finish only if the connection holds a whole
message each way that nobody reads yet: kernel TCP does, up to about its
largest send buffer (net.ipv4.tcp_wmem).
"""
import socket
import sys


def message(who, size):
    pattern = bytes((i * 7 + (31 if who == "server" else 5)) % 251 for i in range(251))
    return (pattern * (size // len(pattern) + 1))[:size]


def exchange(sock, who, size):
    other = "client" if who == "server" else "server"
    sock.sendall(message(who, size))
    got = bytearray()
    while len(got) < size:
        b = sock.recv(1 << 20)
        if not b:
            break
        got += b
    if bytes(got) != message(other, size):
        sys.exit("%s: read %d bytes, not the %d the %s sent" % (who, len(got), size, other))
    print("ok", flush=True)


def main():
    who, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if who == "server":
        lsock = socket.socket()
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", port))
        lsock.listen(1)
        conn, _ = lsock.accept()
        exchange(conn, who, size)
        conn.close()
    else:
        conn = socket.create_connection(("127.0.0.1", port))
        exchange(conn, who, size)
        conn.close()


main()

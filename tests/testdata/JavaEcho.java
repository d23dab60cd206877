// A Java NIO echo server and blocking Java clients, run as a source file
// (java JavaEcho.java ...): the JVM's selector (epoll, EPOLL_CTL_MOD for
// every change of interest, an eventfd or pipe for wakeup()) and its
// sockets (the NIO socket implementation, which interrupts a blocked read
// with a signal and dup2s over the fd when another thread closes it).
//
//   server PORT          echoes every connection's bytes back; when one
//                        cannot be written at once it stops reading that
//                        connection (OP_WRITE) until it can; at EOF it
//                        writes what is left and closes
//   client PORT N ROUNDS N connections at once, each with a writer thread
//                        and a reader thread: ROUNDS messages of sizes from
//                        1 B to 256 KiB, the echo checked byte for byte;
//                        then shutdownOutput and the reader sees EOF. Then
//                        a read blocked on a quiet connection is ended by
//                        close() from another thread, as on kernel TCP.
//                        Prints "ok N".
import java.io.*;
import java.net.*;
import java.nio.*;
import java.nio.channels.*;
import java.util.*;

public class JavaEcho {
    public static void main(String[] a) throws Exception {
        if (a[0].equals("server")) {
            server(Integer.parseInt(a[1]));
        } else {
            client(Integer.parseInt(a[1]), Integer.parseInt(a[2]), Integer.parseInt(a[3]));
        }
    }

    static final int[] SIZES = {1, 100, 4096, 65536, 262144, 16, 30000};

    static void server(int port) throws IOException {
        Selector sel = Selector.open();
        ServerSocketChannel ss = ServerSocketChannel.open();
        ss.bind(new InetSocketAddress("127.0.0.1", port));
        ss.configureBlocking(false);
        ss.register(sel, SelectionKey.OP_ACCEPT);
        while (true) {
            sel.select();
            Iterator<SelectionKey> it = sel.selectedKeys().iterator();
            while (it.hasNext()) {
                SelectionKey k = it.next();
                it.remove();
                if (!k.isValid()) {
                    continue;
                }
                if (k.isAcceptable()) {
                    SocketChannel c = ss.accept();
                    if (c != null) {
                        c.configureBlocking(false);
                        c.register(sel, SelectionKey.OP_READ, new Conn());
                    }
                    continue;
                }
                SocketChannel c = (SocketChannel) k.channel();
                Conn st = (Conn) k.attachment();
                try {
                    if (k.isReadable()) {
                        st.buf.clear();
                        int n = c.read(st.buf);
                        if (n < 0) {
                            st.eof = true;
                        }
                        st.buf.flip();
                    }
                    if (st.buf.hasRemaining()) {
                        c.write(st.buf);
                    }
                    if (st.buf.hasRemaining()) {
                        k.interestOps(SelectionKey.OP_WRITE); // hold reading until it drains
                    } else if (st.eof) {
                        k.cancel();
                        c.close();
                    } else {
                        k.interestOps(SelectionKey.OP_READ);
                    }
                } catch (IOException e) {
                    k.cancel();
                    c.close();
                }
            }
        }
    }

    static final class Conn {
        final ByteBuffer buf = ByteBuffer.allocateDirect(64 * 1024);
        boolean eof;
    }

    // fill writes the bytes of connection id's message r into b.
    static void fill(byte[] b, int len, int id, int r) {
        int x = id * 7919 + r * 104729 + 1;
        for (int i = 0; i < len; i++) {
            x = x * 1103515245 + 12345;
            b[i] = (byte) (x >>> 16);
        }
    }

    static void client(int port, int conns, int rounds) throws Exception {
        List<Thread> threads = new ArrayList<>();
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        for (int id = 0; id < conns; id++) {
            Socket s = new Socket("127.0.0.1", port);
            s.setTcpNoDelay(id % 2 == 0);
            final int cid = id;
            Thread w = new Thread(() -> {
                try {
                    OutputStream o = s.getOutputStream();
                    byte[] b = new byte[262144];
                    for (int r = 0; r < rounds; r++) {
                        int len = SIZES[(r + cid) % SIZES.length];
                        fill(b, len, cid, r);
                        o.write(b, 0, len);
                    }
                    s.shutdownOutput();
                } catch (IOException e) {
                    failures.add("connection " + cid + " write: " + e);
                }
            });
            Thread rd = new Thread(() -> {
                try {
                    InputStream in = s.getInputStream();
                    byte[] want = new byte[262144], got = new byte[262144];
                    for (int r = 0; r < rounds; r++) {
                        int len = SIZES[(r + cid) % SIZES.length];
                        fill(want, len, cid, r);
                        int have = 0;
                        while (have < len) {
                            int n = in.read(got, have, len - have);
                            if (n < 0) {
                                throw new EOFException("EOF at message " + r + ", byte " + have);
                            }
                            have += n;
                        }
                        if (!Arrays.equals(want, 0, len, got, 0, len)) {
                            throw new IOException("message " + r + " differs");
                        }
                    }
                    if (in.read() != -1) {
                        throw new IOException("bytes after the last echo");
                    }
                    s.close();
                } catch (IOException e) {
                    failures.add("connection " + cid + " read: " + e);
                }
            });
            threads.add(w);
            threads.add(rd);
            w.start();
            rd.start();
        }
        for (Thread t : threads) {
            t.join(120_000);
            if (t.isAlive()) {
                failures.add("a connection's thread did not finish within 120 s");
                break;
            }
        }
        asyncClose(port, failures);
        if (!failures.isEmpty()) {
            System.out.println("failed: " + failures);
            System.exit(1);
        }
        System.out.println("ok " + conns);
        System.exit(0);
    }

    // asyncClose checks that close() from another thread ends a read
    // blocked on a connection the server sends nothing on.
    static void asyncClose(int port, List<String> failures) throws Exception {
        Socket s = new Socket("127.0.0.1", port);
        String[] res = new String[1];
        Thread r = new Thread(() -> {
            try {
                res[0] = "read returned " + s.getInputStream().read();
            } catch (IOException e) {
                res[0] = e.getClass().getSimpleName();
            }
        });
        r.start();
        Thread.sleep(300); // the read is blocked by now
        s.close();
        r.join(10_000);
        if (r.isAlive()) {
            failures.add("a read blocked when another thread closed its socket did not return within 10 s");
        } else if (!"SocketException".equals(res[0])) {
            failures.add("a read ended by close: " + res[0] + ", want SocketException");
        }
    }
}

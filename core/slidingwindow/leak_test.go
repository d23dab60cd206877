package slidingwindow

import (
	"runtime"
	"testing"
	"time"
)

// openFDs counts this process's open file descriptors.
func openFDs(t testing.TB) int {
	n := countFDs()
	if n < 0 {
		t.Skip("cannot count file descriptors")
	}
	return n
}

// TestNoLeaks opens, uses and closes transports (in this process, across
// processes, against a hostile peer, after the peer's death) and checks
// that the file descriptors and goroutines come back to where they were.
// It waits for them up to the test deadline, so it fails, not hangs.
func TestNoLeaks(t *testing.T) {
	fds, gs := openFDs(t), runtime.NumGoroutine()
	for i := 0; i < 3; i++ {
		t.Run("in-process", func(t *testing.T) {
			a, b := pair(t, Config{Blocks: 4, BlockSize: 128})
			mustSend(t, a, dataHeader(1, 0), []byte("x"))
			b.Release(mustReceive(t, b))
			w := b.DataBell()
			if err := w.Arm(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- w.Sleep(deadline()) }()
			a.Close() // the sleeper wakes with the end
			if err := <-done; err == nil {
				t.Fatal("sleeper woke without the end")
			}
		})
	}
	t.Run("stream", TestStreamCrossProcess)
	t.Run("killed", TestPeerKilledCrossProcess)
	t.Run("hostile", func(t *testing.T) {
		c := hostileCases[0]
		v, raw := rawPair(t, hostileConfig)
		go rawSide(raw, c, deadline())
		if err := victimSide(v, c, deadline()); err != nil {
			t.Fatal(err)
		}
	})
	dl := deadline()
	for {
		nf, ng := openFDs(t), runtime.NumGoroutine()
		if nf <= fds && ng <= gs {
			return
		}
		if time.Now().After(dl) {
			buf := make([]byte, 1<<20)
			t.Fatalf("leak: %d fds (was %d), %d goroutines (was %d)\n%s", nf, fds, ng, gs, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

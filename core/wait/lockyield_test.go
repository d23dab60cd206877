package wait

import (
	"sync"
	"testing"
	"time"
)

// TestLockYielding: it takes a free lock at once, waits out a holder
// (yielding, then blocking once its tries are spent), and never lets two
// holders in together.
func TestLockYielding(t *testing.T) {
	var mu sync.Mutex
	LockYielding(&mu, 4)
	if mu.TryLock() {
		t.Fatal("a free lock was not taken")
	}
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(5 * time.Millisecond) // past 4 tries' yields
		released <- time.Now()
		mu.Unlock()
	}()
	LockYielding(&mu, 4)
	if got := time.Now(); got.Before(<-released) {
		t.Fatal("taken while held")
	}
	mu.Unlock()

	var wg sync.WaitGroup
	inside := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				LockYielding(&mu, 64)
				inside++
				if inside != 1 {
					t.Error("two holders at once")
				}
				inside--
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

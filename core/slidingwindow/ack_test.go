package slidingwindow

import (
	"testing"
)

// TestAckPolicy walks the acknowledgement rules with 8 blocks (ackEvery 2).
func TestAckPolicy(t *testing.T) {
	a, b := pair(t, Config{Blocks: 8, BlockSize: 64})
	acks := func(want uint64, when string) {
		t.Helper()
		if got := b.Stats().AcksSent; got != want {
			t.Fatalf("%s: %d acknowledgements, want %d", when, got, want)
		}
	}
	send := func(seq uint32) {
		t.Helper()
		if ok, err := a.TrySend(dataHeader(1, seq), []byte{byte(seq)}); !ok || err != nil {
			t.Fatalf("send %d: %v %v", seq, ok, err)
		}
	}
	// Coalescing: one freed block is not worth a SEND, two are.
	send(0)
	b.Release(mustReceive(t, b))
	acks(0, "one block freed")
	send(1)
	b.Release(mustReceive(t, b))
	acks(1, "two blocks freed")

	// The sender fills the ring (its last block says so). Freeing one
	// block while the others wait to be returned (or have not arrived):
	// no acknowledgement yet, the receiver will be back; returning the
	// rest makes it due.
	for seq := uint32(2); seq < 10; seq++ {
		mustSend(t, a, dataHeader(1, seq), []byte{byte(seq)}) // 8 and 9 wait for the acknowledgement
	}
	if ok, _ := a.TrySend(dataHeader(1, 10), []byte{10}); ok {
		t.Fatal("ring of 8 took a ninth block")
	}
	first := mustReceive(t, b)
	b.Release(first)
	acks(1, "one block freed, seven to return")
	for i := 0; i < 7; i++ {
		mustReceive(t, b)
	}
	acks(2, "nothing left to return, the sender full")
	mustSend(t, a, dataHeader(1, 10), []byte{10}) // the freed slot

	// Full again with seven blocks held: the freed one was acknowledged;
	// nothing more is due until a release.
	if ok, _ := a.TrySend(dataHeader(1, 11), []byte{11}); ok {
		t.Fatal("sent into a full ring")
	}
	blk10 := mustReceive(t, b)
	acks(2, "a full sender but nothing freed")
	b.Release(blk10) // held behind 3..9: frees nothing
	acks(2, "a release behind held blocks")
}

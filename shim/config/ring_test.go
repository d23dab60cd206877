package config

import "testing"

// TestAutoBlocks: the direct path's ring holds the kernel's largest send
// buffer, in whole powers of two of blocks, never fewer than the channel
// modes' 64 nor more than 1024; the channel modes keep 64.
func TestAutoBlocks(t *testing.T) {
	for _, tc := range []struct{ sendBuf, blockSize, want int }{
		{4 << 20, 16 << 10, 256},      // tcp_wmem's usual largest
		{4<<20 + 1, 16 << 10, 512},    // a byte more takes the next power of two
		{6 << 20, 16 << 10, 512},      // a host tuned up
		{64 << 10, 16 << 10, 64},      // tuned down: not below 64
		{1 << 30, 16 << 10, 1024},     // tuned far up: capped at 1024
		{4 << 20, 1 << 20, 64},        // large blocks: 64 of them hold 64 MiB
		{4 << 20, 4 << 10, 1024},      // small blocks: 1024 hold 4 MiB
		{16 << 20, 4 << 10, 1024},     // and no more
		{4 << 20, 256, maxAutoBlocks}, // the smallest blocks
	} {
		if got := autoBlocks(tc.sendBuf, tc.blockSize); got != tc.want {
			t.Errorf("autoBlocks(%d, %d) = %d, want %d", tc.sendBuf, tc.blockSize, got, tc.want)
		}
	}
	for _, tc := range []struct {
		env  []string
		want int
	}{
		{nil, 256},
		{[]string{"SDPSHIM_BLOCK_SIZE=64K"}, 64},
		{[]string{"SDPSHIM_CHANNEL=shared"}, defaultBlocks},
		{[]string{"SDPSHIM_CHANNEL=per-connection"}, defaultBlocks},
		{[]string{"SDPSHIM_CHANNEL=shared", "SDPSHIM_BLOCKS=128"}, 128},
		{[]string{"SDPSHIM_BLOCKS=bogus"}, 256}, // rejected: the default, auto
	} {
		c, _ := load(tc.env, testUID, testSendBuf)
		if c.Blocks != tc.want {
			t.Errorf("%q: Blocks %d, want %d", tc.env, c.Blocks, tc.want)
		}
	}
}

// TestParseWmem: tcp_wmem's third value, or 4 MiB when the text is not
// what the kernel writes.
func TestParseWmem(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"4096\t16384\t4194304\n", 4 << 20},
		{"4096 87380 16777216", 16 << 20},
		{"", usualSendBuf},
		{"4096 16384", usualSendBuf},
		{"4096 16384 lots", usualSendBuf},
		{"4096 16384 -1", usualSendBuf},
		{"4096 16384 0", usualSendBuf},
		{"1 2 3 4", usualSendBuf},
	} {
		if got := parseWmem([]byte(tc.text)); got != tc.want {
			t.Errorf("parseWmem(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
	if n := KernelSendBuf(); n <= 0 {
		t.Errorf("KernelSendBuf() = %d", n)
	}
}

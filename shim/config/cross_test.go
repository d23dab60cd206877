package config

import (
	"errors"
	"strings"
	"testing"
)

// TestCrossChecks covers checks between knobs that are valid alone; each
// case names the variable the problem must be reported on ("" = valid).
func TestCrossChecks(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		on   string
		text string
	}{
		{[]string{"SDPSHIM_CREDITS=256"}, "", ""},
		{[]string{"SDPSHIM_CREDITS=257"}, "SDPSHIM_CREDITS", "at most SDPSHIM_BLOCKS (256)"},
		{[]string{"SDPSHIM_CHANNEL=shared", "SDPSHIM_CREDITS=65"}, "SDPSHIM_CREDITS", "at most SDPSHIM_BLOCKS (64)"},
		{[]string{"SDPSHIM_BLOCKS=8", "SDPSHIM_CREDITS=9"}, "SDPSHIM_CREDITS", "at most SDPSHIM_BLOCKS (8)"},
		{[]string{"SDPSHIM_BLOCKS=2"}, "", ""}, // auto credits follow the blocks
		{[]string{"SDPSHIM_BLOCKS=bad", "SDPSHIM_CREDITS=65"}, "SDPSHIM_BLOCKS", ""},
		{[]string{"SDPSHIM_VWINDOW=4M"}, "", ""},
		{[]string{"SDPSHIM_VWINDOW=4097K"}, "SDPSHIM_VWINDOW", "(4194304)"},
		{[]string{"SDPSHIM_BLOCKS=4", "SDPSHIM_VWINDOW=64K"}, "", ""},
		{[]string{"SDPSHIM_BLOCKS=2", "SDPSHIM_VWINDOW=64K"}, "SDPSHIM_VWINDOW", "(32768)"},
		{[]string{"SDPSHIM_POLL_MIN=4096"}, "", ""},
		{[]string{"SDPSHIM_POLL_MIN=4097"}, "SDPSHIM_POLL_MIN", "at most SDPSHIM_POLL_MAX (4096)"},
		{[]string{"SDPSHIM_POLL_MAX=8"}, "SDPSHIM_POLL_MAX", "at least SDPSHIM_POLL_MIN (16)"},
		{[]string{"SDPSHIM_POLL_MAX=8", "SDPSHIM_POLL_MIN=9"}, "SDPSHIM_POLL_MIN", "at most SDPSHIM_POLL_MAX (8)"},
		{[]string{"SDPSHIM_BLOCKS=1024", "SDPSHIM_BLOCK_SIZE=1M"}, "", ""},
		{[]string{"SDPSHIM_BLOCKS=2048", "SDPSHIM_BLOCK_SIZE=1M"}, "SDPSHIM_BLOCK_SIZE", "at most 1G"},
		{[]string{"SDPSHIM_BLOCKS=4096", "SDPSHIM_BLOCK_SIZE=1M", "SDPSHIM_PREEMPT=8K"}, "SDPSHIM_BLOCK_SIZE", ""},
		{[]string{"SDPSHIM_PREEMPT=16K"}, "", ""},
		{[]string{"SDPSHIM_PREEMPT=8K"}, "SDPSHIM_PREEMPT", "from SDPSHIM_BLOCK_SIZE (16384)"},
		{[]string{"SDPSHIM_PREEMPT=8M"}, "SDPSHIM_PREEMPT", "(4194304)"},
		{[]string{"SDPSHIM_BLOCK_SIZE=4K", "SDPSHIM_PREEMPT=8K"}, "", ""},
	} {
		_, err := load(tc.env, testUID, testSendBuf)
		if tc.on == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.env, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || len(e.Problems) != 1 || e.Problems[0].Name != tc.on ||
			!strings.Contains(e.Problems[0].String(), tc.text) {
			t.Errorf("%q: got %v, want one problem on %s mentioning %q", tc.env, err, tc.on, tc.text)
		}
	}
}

// TestCrossResolvedValues checks the "auto" values against their knobs.
func TestCrossResolvedValues(t *testing.T) {
	c := mustLoad(t, "SDPSHIM_BLOCKS=2", "SDPSHIM_BLOCK_SIZE=256")
	if c.Credits != 1 || c.VirtualWindow != 256 || c.PreemptChunk != 256 {
		t.Errorf("Credits=%d VirtualWindow=%d PreemptChunk=%d, want 1 256 256", c.Credits, c.VirtualWindow, c.PreemptChunk)
	}
	c = mustLoad(t, "SDPSHIM_BLOCKS=4096", "SDPSHIM_BLOCK_SIZE=256K")
	if c.Credits != 1024 || c.VirtualWindow != 256<<20 {
		t.Errorf("Credits=%d VirtualWindow=%d, want 1024 %d", c.Credits, c.VirtualWindow, 256<<20)
	}
}

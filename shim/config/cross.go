package config

import (
	"fmt"
	"strings"
)

// crossCheck returns the problems between knobs that are each valid on
// their own. given holds the knobs set in the environment; a check is
// skipped when one of its knobs is bad, so one mistake is reported once.
// A problem is reported on the knob that was set (of two set, on the one
// that depends on the other).
func crossCheck(c Config, given map[string]string, bad map[string]bool) []Problem {
	var out []Problem
	ok := func(names ...string) bool {
		for _, n := range names {
			if bad[n] {
				return false
			}
		}
		return true
	}
	report := func(name, expected, detail string) {
		out = append(out, Problem{Name: name, Value: given[name], Expected: expected, Detail: detail})
	}
	channelOK := ok("SDPSHIM_BLOCKS", "SDPSHIM_BLOCK_SIZE")
	if channelOK && c.ChannelBytes() > maxChannelBytes {
		channelOK = false
		name := "SDPSHIM_BLOCK_SIZE"
		if _, set := given[name]; !set {
			name = "SDPSHIM_BLOCKS"
		}
		report(name, "SDPSHIM_BLOCKS*SDPSHIM_BLOCK_SIZE of at most 1G",
			fmt.Sprintf("%d blocks of %d bytes make %d", c.Blocks, c.BlockSize, c.ChannelBytes()))
	}
	if _, set := given["SDPSHIM_CREDITS"]; set && ok("SDPSHIM_BLOCKS", "SDPSHIM_CREDITS") && c.Credits > c.Blocks {
		report("SDPSHIM_CREDITS", fmt.Sprintf("at most SDPSHIM_BLOCKS (%d)", c.Blocks), "")
	}
	if _, set := given["SDPSHIM_VWINDOW"]; set && channelOK && ok("SDPSHIM_VWINDOW") && c.VirtualWindow > c.ChannelBytes() {
		report("SDPSHIM_VWINDOW", fmt.Sprintf("at most SDPSHIM_BLOCKS*SDPSHIM_BLOCK_SIZE (%d)", c.ChannelBytes()), "")
	}
	if ok("SDPSHIM_POLL_MIN", "SDPSHIM_POLL_MAX") && c.PollMin > c.PollMax {
		if _, set := given["SDPSHIM_POLL_MIN"]; set {
			report("SDPSHIM_POLL_MIN", fmt.Sprintf("at most SDPSHIM_POLL_MAX (%d)", c.PollMax), "")
		} else {
			report("SDPSHIM_POLL_MAX", fmt.Sprintf("at least SDPSHIM_POLL_MIN (%d)", c.PollMin), "")
		}
	}
	if _, set := given["SDPSHIM_PREEMPT"]; set && channelOK && ok("SDPSHIM_PREEMPT") && c.Preempt &&
		(c.PreemptChunk < c.BlockSize || c.PreemptChunk > c.ChannelBytes()) {
		report("SDPSHIM_PREEMPT", fmt.Sprintf("1, 0 or a sub-write size from SDPSHIM_BLOCK_SIZE (%d) to SDPSHIM_BLOCKS*SDPSHIM_BLOCK_SIZE (%d)",
			c.BlockSize, c.ChannelBytes()), "")
	}
	return out
}

// suggest names the knob an unknown variable was probably meant to be,
// as "did you mean SDPSHIM_X?", or returns "".
func suggest(name string) string {
	const maxDistance = 2
	if len(name) > 64 {
		return ""
	}
	best, bestDist := "", maxDistance+1
	for _, k := range knobs {
		if d := editDistance(strings.ToUpper(name), k.Name); d < bestDist {
			best, bestDist = k.Name, d
		}
	}
	if best == "" {
		return ""
	}
	return "did you mean " + best + "?"
}

// editDistance returns the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

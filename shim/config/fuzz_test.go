package config

import (
	"errors"
	"strings"
	"testing"
)

// FuzzLoad feeds Load arbitrary name/value pairs, two of them aimed at
// real knobs, and checks that it never panics, that every problem stays on
// one line, and that an accepted Config keeps every documented invariant.
func FuzzLoad(f *testing.F) {
	f.Add(uint8(4), "3x", uint8(6), "65", "SDPSHIM_BLOKS", "8")
	f.Add(uint8(18), "10.0.0.0/8:8000-8100,[::1]:*", uint8(19), "*:22", "XDG_RUNTIME_DIR", "/run/user/1")
	f.Add(uint8(5), "1M", uint8(4), "4096", "SDPSHIM_PREEMPT", "2G")
	f.Add(uint8(9), "100", uint8(10), "10", "SDPSHIM_POLL_ALPHA", "NaN")
	f.Add(uint8(21), "1,2,,3", uint8(23), "relative", "SDPSHIM_\n", "\x00\xff")
	f.Fuzz(func(t *testing.T, k1 uint8, v1 string, k2 uint8, v2 string, name, value string) {
		environ := []string{
			knobs[int(k1)%len(knobs)].Name + "=" + v1,
			knobs[int(k2)%len(knobs)].Name + "=" + v2,
			name + "=" + value,
		}
		c, err := load(environ, testUID, testSendBuf)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) == 0 {
				t.Fatalf("error %v is not an *Error with problems", err)
			}
			for _, line := range e.Lines() {
				if strings.ContainsAny(line, "\n\r") || !strings.HasPrefix(line, "sdpshim: ") {
					t.Fatalf("bad line %q", line)
				}
			}
			if got, reason := Fallback(c, err); got.Enabled || reason == "" {
				t.Fatal("Fallback left the shim enabled")
			}
			return
		}
		checkInvariants(t, c)
	})
}

// checkInvariants fails t when an accepted Config breaks a documented
// property.
func checkInvariants(t *testing.T, c Config) {
	t.Helper()
	switch {
	case !isPowerOfTwo(c.Blocks) || c.Blocks < minBlocks || c.Blocks > maxBlocks:
		t.Fatalf("Blocks %d", c.Blocks)
	case c.BlockSize < minBlockSize || c.BlockSize > maxBlockSize || c.BlockSize%blockAlign != 0:
		t.Fatalf("BlockSize %d", c.BlockSize)
	case c.ChannelBytes() > maxChannelBytes:
		t.Fatalf("channel %d bytes", c.ChannelBytes())
	case c.Credits < 1 || c.Credits > c.Blocks:
		t.Fatalf("Credits %d of %d", c.Credits, c.Blocks)
	case c.VirtualWindow < minBlockSize || c.VirtualWindow > c.ChannelBytes():
		t.Fatalf("VirtualWindow %d", c.VirtualWindow)
	case c.PollMin < 0 || c.PollMin > c.PollMax || c.PollMax > maxPolls:
		t.Fatalf("poll budget %d..%d", c.PollMin, c.PollMax)
	case !(c.PollAlpha > 1 && c.PollAlpha <= maxAlpha) || !(c.PollBeta > 0 && c.PollBeta < 1) || !(c.PollDelta >= 0):
		t.Fatalf("alpha %v beta %v delta %v", c.PollAlpha, c.PollBeta, c.PollDelta)
	case c.PollPeriod < minPollPeriod || c.PollPeriod > maxPollPeriod:
		t.Fatalf("PollPeriod %v", c.PollPeriod)
	case c.Preempt != (c.PreemptChunk > 0) || c.Preempt && (c.PreemptChunk < c.BlockSize || c.PreemptChunk > c.ChannelBytes()):
		t.Fatalf("Preempt %v chunk %d", c.Preempt, c.PreemptChunk)
	case !strings.HasPrefix(c.RunDir, "/") || len(c.RunDir) > maxRunDir:
		t.Fatalf("RunDir %q", c.RunDir)
	case !c.AllowsUID(testUID):
		t.Fatalf("AllowUIDs %v lacks own uid", c.AllowUIDs)
	case c.LogFile != "" && !strings.HasPrefix(c.LogFile, "/"):
		t.Fatalf("LogFile %q", c.LogFile)
	}
	if _, ok := c.LogLevel.Logrus(); !ok && c.LogLevel != LogOff {
		t.Fatalf("LogLevel %q", c.LogLevel)
	}
	for _, rs := range []Rules{c.Rules.Include, c.Rules.Exclude} {
		if again, err := ParseRules(rs.String()); err != nil || again.String() != rs.String() {
			t.Fatalf("rules %q do not round-trip: %v", rs, err)
		}
	}
}

// FuzzParseRules checks that rule parsing never panics and that accepted
// rules print in a form that parses back to the same rules.
func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"127.0.0.1:6379,[::1]:*,10.0.0.0/8:8000-8100", "[fd00::]/8", "*", "[::ffff:1.2.3.4/120]:1-2", "[", "1:2:3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ParseRules(s)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		again, err := ParseRules(rs.String())
		if err != nil || again.String() != rs.String() {
			t.Fatalf("%q -> %q does not round-trip: %v", s, rs, err)
		}
	})
}

package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testUID is the uid tests load as, unless they say otherwise.
const testUID = 1000

// testSendBuf is the kernel's largest TCP send buffer tests load with:
// tcp_wmem's usual 4 MiB, so that SDPSHIM_BLOCKS=auto gives 256.
const testSendBuf = 4 << 20

// mustLoad loads environ as testUID and fails the test on error.
func mustLoad(t *testing.T, environ ...string) Config {
	t.Helper()
	c, err := load(environ, testUID, testSendBuf)
	if err != nil {
		t.Fatalf("load(%q): %v", environ, err)
	}
	return c
}

// fields reads, per knob, the Config field(s) it sets.
var fields = map[string]func(Config) any{
	"SDPSHIM_ENABLE":      func(c Config) any { return c.Enabled },
	"SDPSHIM_PROVIDER":    func(c Config) any { return c.Provider },
	"SDPSHIM_FLOW":        func(c Config) any { return c.Flow },
	"SDPSHIM_TRANSPORT":   func(c Config) any { return c.Transport },
	"SDPSHIM_BLOCKS":      func(c Config) any { return c.Blocks },
	"SDPSHIM_BLOCK_SIZE":  func(c Config) any { return c.BlockSize },
	"SDPSHIM_CREDITS":     func(c Config) any { return c.Credits },
	"SDPSHIM_VWINDOW":     func(c Config) any { return c.VirtualWindow },
	"SDPSHIM_POLL":        func(c Config) any { return c.Poll },
	"SDPSHIM_POLL_MIN":    func(c Config) any { return c.PollMin },
	"SDPSHIM_POLL_MAX":    func(c Config) any { return c.PollMax },
	"SDPSHIM_POLL_ALPHA":  func(c Config) any { return c.PollAlpha },
	"SDPSHIM_POLL_BETA":   func(c Config) any { return c.PollBeta },
	"SDPSHIM_POLL_DELTA":  func(c Config) any { return c.PollDelta },
	"SDPSHIM_POLL_PERIOD": func(c Config) any { return c.PollPeriod },
	"SDPSHIM_POLL_SPIN":   func(c Config) any { return c.PollSpin },
	"SDPSHIM_CHANNEL":     func(c Config) any { return c.Channel },
	"SDPSHIM_PREEMPT":     func(c Config) any { return [2]any{c.Preempt, c.PreemptChunk} },
	"SDPSHIM_INCLUDE":     func(c Config) any { return c.Rules.Include.String() },
	"SDPSHIM_EXCLUDE":     func(c Config) any { return c.Rules.Exclude.String() },
	"SDPSHIM_SERVICES":    func(c Config) any { return c.Services.String() },
	"SDPSHIM_RUNDIR":      func(c Config) any { return c.RunDir },
	"SDPSHIM_ALLOW_UIDS":  func(c Config) any { return c.AllowUIDs },
	"SDPSHIM_LOG_LEVEL":   func(c Config) any { return c.LogLevel },
	"SDPSHIM_LOG_FILE":    func(c Config) any { return c.LogFile },
	"SDPSHIM_STATS":       func(c Config) any { return c.Stats },
	"SDPSHIM_SHORT_CONN":  func(c Config) any { return c.ShortConn },
	"SDPSHIM_CORE":        func(c Config) any { return c.CorePath },
}

// bad marks a value the knob must reject.
type bad struct{}

// knobCases lists, per knob, values and what the field must hold after
// loading them alone (bad{} = rejected). "" means unset: the default.
var knobCases = map[string][]struct {
	value string
	want  any
}{
	"SDPSHIM_ENABLE": {{"", true}, {"1", true}, {"0", false}, {"TRUE", true}, {"off", false},
		{" yes ", true}, {"2", bad{}}, {"enable", bad{}}},
	"SDPSHIM_PROVIDER": {{"", ProviderAuto}, {"shm", ProviderSHM}, {"RDMA", ProviderRDMA},
		{"tcp", ProviderTCP}, {"ib", bad{}}},
	"SDPSHIM_FLOW": {{"", FlowPacked}, {"credit", FlowCredit}, {"nicassist", FlowNICAssist},
		{"nic-assist", bad{}}},
	"SDPSHIM_TRANSPORT": {{"", TransportStatusByte}, {"slidingwindow", TransportSlidingWindow},
		{"sliding", bad{}}},
	"SDPSHIM_BLOCKS": {{"", 256}, {"auto", 256}, {"2", 2}, {"4096", 4096}, {"128", 128}, {"1", bad{}},
		{"8192", bad{}}, {"3", bad{}}, {"3x", bad{}}, {"-64", bad{}}, {"0x40", bad{}}},
	"SDPSHIM_BLOCK_SIZE": {{"", 16384}, {"256", 256}, {"1M", 1 << 20}, {"1MiB", 1 << 20},
		{"64k", 65536}, {"4 KiB", 4096}, {"192", bad{}}, {"1025K", bad{}}, {"300", bad{}},
		{"1G", bad{}}, {"K", bad{}}, {"16KB", bad{}}, {"99999999999999999999K", bad{}}},
	"SDPSHIM_CREDITS": {{"", 64}, {"auto", 64}, {"1", 1}, {"64", 64}, {"0", bad{}},
		{"4097", bad{}}, {"many", bad{}}},
	"SDPSHIM_VWINDOW": {{"", 1 << 20}, {"AUTO", 1 << 20}, {"256", 256}, {"1M", 1 << 20},
		{"255", bad{}}, {"2G", bad{}}, {"wide", bad{}}},
	"SDPSHIM_POLL": {{"", PollAdaptive}, {"busy", PollBusy}, {"event", PollEvent},
		{"hybrid", PollHybrid}, {"napi", bad{}}},
	"SDPSHIM_POLL_MIN": {{"", 16}, {"0", 0}, {"4096", 4096}, {"-1", bad{}}, {"1000001", bad{}},
		{"1.5", bad{}}},
	"SDPSHIM_POLL_MAX": {{"", 4096}, {"16", 16}, {"1000000", 1000000}, {"0", bad{}},
		{"1000001", bad{}}},
	"SDPSHIM_POLL_ALPHA": {{"", 2.0}, {"1.01", 1.01}, {"16", 16.0}, {"1", bad{}},
		{"16.5", bad{}}, {"NaN", bad{}}, {"+Inf", bad{}}, {"two", bad{}}},
	"SDPSHIM_POLL_BETA": {{"", 0.5}, {"0.01", 0.01}, {"0.99", 0.99}, {"0", bad{}},
		{"1", bad{}}, {"-0.5", bad{}}, {"nan", bad{}}},
	"SDPSHIM_POLL_DELTA": {{"", 16.0}, {"0", 0.0}, {"2.5", 2.5}, {"1000000", 1e6},
		{"-1", bad{}}, {"1e7", bad{}}, {"inf", bad{}}},
	"SDPSHIM_POLL_PERIOD": {{"", time.Millisecond}, {"10us", 10 * time.Microsecond},
		{"500µs", 500 * time.Microsecond}, {"10s", 10 * time.Second}, {"9us", bad{}},
		{"11s", bad{}}, {"1000", bad{}}, {"-1ms", bad{}}},
	"SDPSHIM_POLL_SPIN": {{"", 256}, {"0", 0}, {"1000000", 1000000}, {"-5", bad{}}},
	"SDPSHIM_CHANNEL": {{"", ChannelDirect}, {"shared", ChannelShared}, {"per-connection", ChannelPerConnection},
		{"perconnection", bad{}}},
	"SDPSHIM_PREEMPT": {{"", [2]any{true, 16384}}, {"0", [2]any{false, 0}},
		{"off", [2]any{false, 0}}, {"on", [2]any{true, 16384}}, {"64K", [2]any{true, 65536}},
		{"1M", [2]any{true, 1 << 20}}, {"2", bad{}}, {"sometimes", bad{}}},
	"SDPSHIM_INCLUDE": {{"", "*:*"}, {"127.0.0.1:6379", "127.0.0.1:6379"},
		{"127.0.0.1:6379, [::1]:*,10.0.0.0/8:8000-8100", "127.0.0.1:6379,[::1]:*,10.0.0.0/8:8000-8100"},
		{"10.0.0.0/33:1", bad{}}, {"a,,b", bad{}}, {"localhost:80", bad{}}},
	"SDPSHIM_EXCLUDE":  {{"", ""}, {"*:22", "*:22"}, {"::1:80", bad{}}, {"*:0", bad{}}},
	"SDPSHIM_SERVICES": {{"", ""}, {"10.96.0.0/12", "10.96.0.0/12:*"}, {"10.96.0.0/12:6379", "10.96.0.0/12:6379"}, {"10.96.0.0/33", bad{}}},
	"SDPSHIM_RUNDIR": {{"", "/tmp/sdpshim-1000"}, {"/srv/sdpshim/", "/srv/sdpshim"},
		{"/" + strings.Repeat("d", 79), "/" + strings.Repeat("d", 79)},
		{"/" + strings.Repeat("d", 80), bad{}}, {"run/sdpshim", bad{}}},
	"SDPSHIM_ALLOW_UIDS": {{"", []uint32{1000}}, {"0", []uint32{0, 1000}},
		{"2000, 1000,0,2000", []uint32{0, 1000, 2000}}, {"4294967294", []uint32{1000, 4294967294}},
		{"4294967295", bad{}}, {"-1", bad{}}, {"root", bad{}}, {"1,,2", bad{}}},
	"SDPSHIM_LOG_LEVEL": {{"", LogOff}, {"off", LogOff}, {"panic", LogPanic}, {"Trace", LogTrace},
		{"warning", LogWarn}, {"verbose", bad{}}},
	"SDPSHIM_LOG_FILE": {{"", ""}, {"stderr", ""}, {"/var/log/sdpshim.log", "/var/log/sdpshim.log"},
		{"/tmp//x/../y.log", "/tmp/y.log"}, {"sdpshim.log", bad{}}, {"-", bad{}}},
	"SDPSHIM_STATS":      {{"", true}, {"0", false}, {"no", false}, {"maybe", bad{}}},
	"SDPSHIM_SHORT_CONN": {{"", true}, {"0", false}, {"on", true}, {"sometimes", bad{}}},
	"SDPSHIM_CORE": {{"", ""}, {"/opt/sdpshim/libsdpshim-core.so", "/opt/sdpshim/libsdpshim-core.so"},
		{"/opt//x/../core.so", "/opt/core.so"}, {"libsdpshim-core.so", bad{}}},
}

// TestKnobValues loads each case alone and checks the field, or that the
// knob alone is reported and keeps its default.
func TestKnobValues(t *testing.T) {
	defaults := mustLoad(t)
	for _, k := range knobs {
		get, cases := fields[k.Name], knobCases[k.Name]
		if get == nil || len(cases) == 0 {
			t.Errorf("%s: no test cases", k.Name)
			continue
		}
		for _, tc := range cases {
			c, err := load([]string{k.Name + "=" + tc.value}, testUID, testSendBuf)
			if _, isBad := tc.want.(bad); isBad {
				e, ok := err.(*Error)
				if !ok || len(e.Problems) != 1 || e.Problems[0].Name != k.Name {
					t.Errorf("%s=%q: want one problem on %s, got %v", k.Name, tc.value, k.Name, err)
					continue
				}
				if got, want := get(c), get(defaults); !reflect.DeepEqual(got, want) {
					t.Errorf("%s=%q: rejected value left %v, want the default %v", k.Name, tc.value, got, want)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s=%q: %v", k.Name, tc.value, err)
				continue
			}
			if got := get(c); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s=%q: got %#v, want %#v", k.Name, tc.value, got, tc.want)
			}
		}
	}
}

// TestDefaultLiteralsLoad checks that setting every knob to its Default
// literal loads the same Config as setting nothing.
func TestDefaultLiteralsLoad(t *testing.T) {
	var environ []string
	for _, k := range knobs {
		if k.Default != "" {
			environ = append(environ, k.Name+"="+k.Default)
		}
	}
	if got, want := mustLoad(t, environ...), mustLoad(t); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults written out:\n%+v\nnothing set:\n%+v", got, want)
	}
}

// TestDefaults pins the documented defaults of the fields.
func TestDefaults(t *testing.T) {
	c := mustLoad(t)
	if !c.Enabled || c.Flow != FlowPacked || c.Blocks != 256 || c.BlockSize != 16384 ||
		c.ChannelBytes() != 4<<20 || c.LogLevel != LogOff || !c.Stats || !c.Preempt {
		t.Errorf("defaults: %+v", c)
	}
	if !c.Eligible(netip.MustParseAddr("192.0.2.1"), 80) || !c.Eligible(netip.MustParseAddr("2001:db8::1"), 443) {
		t.Error("default rules must include every endpoint")
	}
	if !c.AllowsUID(testUID) || c.AllowsUID(0) {
		t.Errorf("default AllowUIDs = %v, want only %d", c.AllowUIDs, testUID)
	}
}

// TestEnvironRules covers how entries are read: first wins, blanks are
// unset, entries without "=" and private names are ignored.
func TestEnvironRules(t *testing.T) {
	c := mustLoad(t, "SDPSHIM_BLOCKS=8", "SDPSHIM_BLOCKS=bogus", "SDPSHIM_FLOW=  ",
		"SDPSHIM_POLL", "=x", "SDPSHIM__CORE=/opt/libsdpshim-core.so", "OTHER_VAR=1")
	if c.Blocks != 8 || c.Flow != FlowPacked {
		t.Errorf("Blocks=%d Flow=%s, want 8 packed", c.Blocks, c.Flow)
	}
	if v, ok := Getenv([]string{"A=1", "A=2", "B"}, "A"); !ok || v != "1" {
		t.Errorf("Getenv = %q %v, want first value", v, ok)
	}
	if _, ok := Getenv([]string{"B"}, "B"); ok {
		t.Error("Getenv found an entry without =")
	}
}

// TestTable checks the table itself: names, texts, no duplicates.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Knobs() {
		if !strings.HasPrefix(k.Name, Prefix) || strings.HasPrefix(k.Name, privatePrefix) || seen[k.Name] {
			t.Errorf("bad or duplicate name %q", k.Name)
		}
		seen[k.Name] = true
		if k.Expected == "" || k.Meaning == "" || k.set == nil || strings.ContainsAny(k.Meaning+k.Expected, "\n|") {
			t.Errorf("%s: incomplete or multi-line row", k.Name)
		}
		if got, ok := LookupKnob(k.Name); !ok || got.Name != k.Name {
			t.Errorf("LookupKnob(%s) failed", k.Name)
		}
	}
	if _, ok := LookupKnob("SDPSHIM_NOPE"); ok {
		t.Error("LookupKnob found an unknown name")
	}
}

package config

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseRulesCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:6379", "127.0.0.1:6379"},
		{"127.0.0.1", "127.0.0.1:*"},
		{"*", "*:*"},
		{"*:*", "*:*"},
		{"10.1.2.3/8:8000-8100", "10.0.0.0/8:8000-8100"},
		{"[::1]:*", "[::1]:*"},
		{"[::1]", "[::1]:*"},
		{"[fd00::/8]:443", "[fd00::/8]:443"},
		{"[fd00::]/8:443", "[fd00::/8]:443"},
		{"[fd00::]/8", "[fd00::/8]:*"},
		{"[::ffff:10.0.0.0/104]:80", "10.0.0.0/8:80"},
		{"[::ffff:127.0.0.1]:80", "127.0.0.1:80"},
		{"0.0.0.0/0:1-65535", "0.0.0.0/0:1-65535"},
		{"1.2.3.4:5-5", "1.2.3.4:5"},
		{" 1.2.3.4:1 , 5.6.7.8:2 ", "1.2.3.4:1,5.6.7.8:2"},
		{"", ""},
		{"  ", ""},
	} {
		rs, err := ParseRules(tc.in)
		if err != nil {
			t.Errorf("ParseRules(%q): %v", tc.in, err)
			continue
		}
		if got := rs.String(); got != tc.want {
			t.Errorf("ParseRules(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again, err := ParseRules(rs.String()); err != nil || again.String() != tc.want {
			t.Errorf("round trip of %q: %q %v", tc.want, again, err)
		}
	}
}

func TestParseRulesErrors(t *testing.T) {
	for _, tc := range []struct{ in, detail string }{
		{"::1:80", "brackets"},
		{"fd00::/8", "brackets"},
		{"[::1:80", "missing ]"},
		{"[::1]80", "after ]"},
		{"[fe80::1%eth0]:80", "zones"},
		{"localhost:80", "host names"},
		{"10.0.0.0/33", "prefix"},
		{"1.2.3.4:0", "port"},
		{"1.2.3.4:65536", "port"},
		{"1.2.3.4:", "port"},
		{"1.2.3.4:*-5", "port"},
		{"1.2.3.4:90-80", "backwards"},
		{"1.2.3.4:80-", "port"},
		{"1.2.3.4:+80", "port"},
		{"1.2.3.4:80,", "empty rule"},
		{",1.2.3.4", "empty rule"},
		{"1.2.3.4:80,5.6.7:80", `rule 2 "5.6.7:80"`},
	} {
		_, err := ParseRules(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("ParseRules(%q) = %v, want an error mentioning %q", tc.in, err, tc.detail)
		}
	}
}

func TestRuleMatch(t *testing.T) {
	rules := "127.0.0.1:6379,[::1]:*,10.0.0.0/8:8000-8100,[fd00::/8]:443"
	rs, err := ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ip   string
		port uint16
		want bool
	}{
		{"127.0.0.1", 6379, true},
		{"127.0.0.1", 6380, false},
		{"127.0.0.2", 6379, false},
		{"::ffff:127.0.0.1", 6379, true}, // dual-stack sockets see mapped addresses
		{"::1", 1, true},
		{"::1", 65535, true},
		{"::2", 1, false},
		{"10.255.0.1", 8000, true},
		{"10.0.0.1", 8100, true},
		{"10.0.0.1", 7999, false},
		{"10.0.0.1", 8101, false},
		{"11.0.0.1", 8050, false},
		{"fd12::1", 443, true},
		{"fd12::1%eth0", 443, true}, // zones are ignored
		{"fe80::1", 443, false},
	} {
		if got := rs.Match(netip.MustParseAddr(tc.ip), tc.port); got != tc.want {
			t.Errorf("%s matching %s:%d = %v, want %v", rules, tc.ip, tc.port, got, tc.want)
		}
	}
	if rs.Match(netip.Addr{}, 6379) {
		t.Error("the zero Addr must match nothing")
	}
	any, _ := ParseRules("*:22")
	if !any.Match(netip.MustParseAddr("192.0.2.1"), 22) || !any.Match(netip.MustParseAddr("2001:db8::1"), 22) ||
		any.Match(netip.MustParseAddr("192.0.2.1"), 23) {
		t.Error("*:22 must match port 22 on IPv4 and IPv6 only")
	}
}

// TestRuleSetExcludeWins checks include/exclude together, through Load.
func TestRuleSetExcludeWins(t *testing.T) {
	for _, tc := range []struct {
		include, exclude string
		ip               string
		port             uint16
		want             bool
	}{
		{"", "", "192.0.2.1", 80, true},
		{"", "*:22", "192.0.2.1", 22, false},
		{"", "*:22", "192.0.2.1", 23, true},
		{"10.0.0.0/8", "10.1.0.0/16", "10.2.0.1", 80, true},
		{"10.0.0.0/8", "10.1.0.0/16", "10.1.0.1", 80, false},
		{"10.0.0.0/8", "10.1.0.0/16", "11.0.0.1", 80, false},
		{"*:*", "*:*", "10.0.0.1", 80, false},
		{"[::1]", "[::1]:5432", "::1", 5432, false},
		{"[::1]", "[::1]:5432", "::1", 5433, true},
	} {
		c := mustLoad(t, "SDPSHIM_INCLUDE="+tc.include, "SDPSHIM_EXCLUDE="+tc.exclude)
		if got := c.Eligible(netip.MustParseAddr(tc.ip), tc.port); got != tc.want {
			t.Errorf("include %q exclude %q: %s:%d = %v, want %v", tc.include, tc.exclude, tc.ip, tc.port, got, tc.want)
		}
	}
}

package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Rule matches remote endpoints by address and port. Rules are written
// ADDR:PORT, where ADDR is an IPv4 address, an IPv6 address in brackets,
// either as a CIDR prefix ("10.0.0.0/8", "[fd00::/8]" or "[fd00::]/8"), or
// "*" for any address; PORT is a port, a range "8000-8100", or "*" for any
// port. ":PORT" may be left out and means any port. Host names are not
// resolved.
type Rule struct {
	// Prefix is the address range; the zero Prefix means any address,
	// IPv4 or IPv6. IPv4-mapped IPv6 prefixes are stored as IPv4.
	Prefix netip.Prefix
	// PortLo and PortHi bound the ports matched, inclusive.
	PortLo, PortHi uint16
}

// Match reports whether ip:port falls within r. IPv4-mapped IPv6
// addresses (as dual-stack sockets report them) match IPv4 rules; zones
// are ignored. An invalid ip matches nothing.
func (r Rule) Match(ip netip.Addr, port uint16) bool {
	if !ip.IsValid() || port < r.PortLo || port > r.PortHi {
		return false
	}
	if !r.Prefix.IsValid() {
		return true
	}
	return r.Prefix.Contains(ip.Unmap().WithZone(""))
}

// String returns r in the syntax ParseRules accepts, canonicalised.
func (r Rule) String() string {
	var addr string
	switch {
	case !r.Prefix.IsValid():
		addr = "*"
	case r.Prefix.IsSingleIP():
		addr = r.Prefix.Addr().String()
	default:
		addr = r.Prefix.String()
	}
	if r.Prefix.IsValid() && r.Prefix.Addr().Is6() {
		addr = "[" + addr + "]"
	}
	switch {
	case r.PortLo == 0 && r.PortHi == 65535:
		return addr + ":*"
	case r.PortLo == r.PortHi:
		return fmt.Sprintf("%s:%d", addr, r.PortLo)
	}
	return fmt.Sprintf("%s:%d-%d", addr, r.PortLo, r.PortHi)
}

// Rules is a list of rules; it matches when any rule does.
type Rules []Rule

// Match reports whether any rule matches ip:port.
func (rs Rules) Match(ip netip.Addr, port uint16) bool {
	for _, r := range rs {
		if r.Match(ip, port) {
			return true
		}
	}
	return false
}

// String returns the rules comma-separated, canonicalised.
func (rs Rules) String() string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// RuleSet is SDPSHIM_INCLUDE with SDPSHIM_EXCLUDE.
type RuleSet struct {
	// Include lists the endpoints that may be accelerated; empty means all.
	Include Rules
	// Exclude lists endpoints that are never accelerated; it wins over
	// Include.
	Exclude Rules
}

// Match reports whether ip:port is included and not excluded.
func (s RuleSet) Match(ip netip.Addr, port uint16) bool {
	if len(s.Include) > 0 && !s.Include.Match(ip, port) {
		return false
	}
	return !s.Exclude.Match(ip, port)
}

// ParseRules parses comma-separated rules (see Rule). Blanks around rules
// are ignored; an empty or blank string is no rules; an empty rule between
// commas is an error. The error names the first bad rule.
func ParseRules(s string) (Rules, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	items := strings.Split(s, ",")
	rules := make(Rules, 0, len(items))
	for i, item := range items {
		item = strings.TrimSpace(item)
		r, err := parseRule(item)
		if err != nil {
			return nil, fmt.Errorf("rule %d %s: %w", i+1, strconv.Quote(clip(item)), err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// parseRule parses one ADDR[:PORT] rule.
func parseRule(t string) (Rule, error) {
	if t == "" {
		return Rule{}, errors.New("empty rule")
	}
	addr, port, err := splitRule(t)
	if err != nil {
		return Rule{}, err
	}
	var r Rule
	if r.Prefix, err = parseRuleAddr(addr); err != nil {
		return Rule{}, err
	}
	if r.PortLo, r.PortHi, err = parsePorts(port); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// splitRule cuts a rule into its address and port parts; a missing port
// part is "*".
func splitRule(t string) (addr, port string, err error) {
	if strings.HasPrefix(t, "[") {
		end := strings.IndexByte(t, ']')
		if end < 0 {
			return "", "", errors.New("missing ]")
		}
		addr, rest := t[1:end], t[end+1:]
		if strings.HasPrefix(rest, "/") { // "[fd00::]/8"
			n := strings.IndexByte(rest, ':')
			if n < 0 {
				n = len(rest)
			}
			addr, rest = addr+rest[:n], rest[n:]
		}
		switch {
		case rest == "":
			return addr, "*", nil
		case rest[0] == ':':
			return addr, rest[1:], nil
		}
		return "", "", errors.New("expected :PORT after ]")
	}
	switch strings.Count(t, ":") {
	case 0:
		return t, "*", nil
	case 1:
		i := strings.IndexByte(t, ':')
		return t[:i], t[i+1:], nil
	}
	return "", "", errors.New("an IPv6 address needs brackets, e.g. [::1]:80")
}

// parseRuleAddr parses "*", an address or a CIDR prefix. The zero Prefix
// stands for "*".
func parseRuleAddr(s string) (netip.Prefix, error) {
	if s == "*" {
		return netip.Prefix{}, nil
	}
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, errors.New("not an address prefix")
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, errors.New("not an IP address (host names are not resolved)")
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("zones are not supported")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// parsePorts parses "*", "N" or "N-M" with 1 <= N <= M <= 65535.
func parsePorts(s string) (lo, hi uint16, err error) {
	if s == "*" {
		return 0, 65535, nil
	}
	first, last, isRange := strings.Cut(s, "-")
	if lo, err = parsePort(first); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = parsePort(last); err != nil {
			return 0, 0, err
		}
		if lo > hi {
			return 0, 0, errors.New("port range runs backwards")
		}
	}
	return lo, hi, nil
}

// parsePort parses a port from 1 to 65535.
func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, errors.New("port must be *, N or N-M with N, M from 1 to 65535")
	}
	return uint16(n), nil
}

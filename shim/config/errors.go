package config

import (
	"strconv"
	"strings"
)

// Consequence ends every line of Error: what the shim does about a bad
// configuration.
const Consequence = "the shim is disabled, the program runs on plain TCP"

// maxShownValue bounds how much of a value a message quotes.
const maxShownValue = 64

// Problem is one thing wrong with the environment.
type Problem struct {
	// Name is the variable, as found in the environment.
	Name string
	// Value is the variable's value, as found.
	Value string
	// Expected says what an acceptable value looks like; "" for a
	// variable that is not a knob.
	Expected string
	// Detail narrows the problem down (which rule, which conflicting
	// variable); may be "".
	Detail string
}

// String returns the problem on one line, without the "sdpshim: " prefix
// or the consequence, e.g. `SDPSHIM_BLOCKS="3x": expected a power of two
// from 2 to 4096`. Name and value are quoted when needed so that any input
// stays on one line.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(showName(p.Name))
	b.WriteString("=")
	b.WriteString(showValue(p.Value))
	b.WriteString(": ")
	if p.Expected == "" {
		b.WriteString("not a known variable")
	} else {
		b.WriteString("expected ")
		b.WriteString(p.Expected)
	}
	if p.Detail != "" {
		b.WriteString(" (")
		b.WriteString(p.Detail)
		b.WriteString(")")
	}
	return b.String()
}

// Error is every problem Load found, in table order, unknown variables
// last. It is returned as error; use errors.As to get at the problems.
type Error struct {
	Problems []Problem
}

// Error returns one line per problem, each "sdpshim: " + Problem.String()
// + "; " + Consequence, joined by newlines.
func (e *Error) Error() string {
	lines := e.Lines()
	return strings.Join(lines, "\n")
}

// Lines returns Error's lines, without newlines.
func (e *Error) Lines() []string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "sdpshim: " + p.String() + "; " + Consequence
	}
	return lines
}

// Has reports whether one of the problems is about the variable name.
func (e *Error) Has(name string) bool {
	for _, p := range e.Problems {
		if p.Name == name {
			return true
		}
	}
	return false
}

// showName returns name as is when it is a plain variable name, else
// quoted.
func showName(name string) string {
	for _, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return strconv.Quote(clip(name))
		}
	}
	if name == "" {
		return `""`
	}
	return clip(name)
}

// showValue returns value quoted, clipped to maxShownValue bytes.
func showValue(value string) string { return strconv.Quote(clip(value)) }

// clip shortens s to about maxShownValue bytes without splitting a UTF-8
// sequence, marking the cut with "...".
func clip(s string) string {
	if len(s) <= maxShownValue {
		return s
	}
	cut := maxShownValue
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}

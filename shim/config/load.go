package config

import (
	"errors"
	"os"
	"strings"
)

// Prefix starts the name of every knob.
const Prefix = "SDPSHIM_"

// privatePrefix starts names reserved for plumbing between sdpshim's own
// parts; Load ignores them.
const privatePrefix = "SDPSHIM__"

// Load parses and validates the knobs found in environ, a list of
// "NAME=value" strings as returned by os.Environ. It never panics and has
// no side effects.
//
// On success the error is nil and every Config field is set. Otherwise
// the error is an *Error listing every problem, and the Config is still
// complete: each bad variable has its default and Enabled is whatever
// SDPSHIM_ENABLE said; pass both to Fallback before using it.
//
// The one thing it reads besides environ is the kernel's largest TCP send
// buffer (net.ipv4.tcp_wmem), which SDPSHIM_BLOCKS=auto follows.
func Load(environ []string) (Config, error) {
	return load(environ, os.Geteuid(), KernelSendBuf())
}

// FromEnviron is Load(os.Environ()).
func FromEnviron() (Config, error) { return Load(os.Environ()) }

// loader is the context knob parsers may consult.
type loader struct {
	uid     int                         // effective uid of the process
	sendBuf int                         // the kernel's largest TCP send buffer, bytes (autoBlocks)
	lookup  func(string) (string, bool) // any variable in the environment
	given   map[string]string           // knobs set (non-empty), trimmed
}

// load is Load with the uid and the kernel's largest TCP send buffer
// (bytes) passed in, for tests.
func load(environ []string, uid, sendBuf int) (Config, error) {
	env, names := parseEnviron(environ)
	l := &loader{
		uid:     uid,
		sendBuf: sendBuf,
		lookup:  func(name string) (string, bool) { v, ok := env[name]; return v, ok },
		given:   map[string]string{},
	}
	var c Config
	var problems []Problem
	bad := map[string]bool{}
	for _, k := range knobs {
		if err := k.set(&c, k.Default, l); err != nil {
			// A table bug; tests keep it from happening. Report, never panic.
			problems = append(problems, Problem{Name: k.Name, Value: k.Default, Expected: k.Expected, Detail: "bad built-in default"})
		}
		v := strings.TrimSpace(env[k.Name])
		if v == "" {
			continue
		}
		l.given[k.Name] = v
		if err := k.set(&c, v, l); err != nil {
			problems = append(problems, knobProblem(k, v, err))
			bad[k.Name] = true
		}
	}
	resolve(&c, l)
	problems = append(problems, crossCheck(c, l.given, bad)...)
	for _, name := range names {
		if _, known := LookupKnob(name); !known {
			problems = append(problems, Problem{Name: name, Value: env[name], Detail: suggest(name)})
		}
	}
	if len(problems) > 0 {
		return c, &Error{Problems: problems}
	}
	return c, nil
}

// parseEnviron indexes "NAME=value" entries; the first of a name wins.
// It also returns, in order, the SDPSHIM_* names that are not private.
// Entries without "=" are ignored, as libc ignores them.
func parseEnviron(environ []string) (env map[string]string, names []string) {
	env = make(map[string]string, len(environ))
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if _, dup := env[name]; dup {
			continue
		}
		env[name] = value
		if strings.HasPrefix(name, Prefix) && !strings.HasPrefix(name, privatePrefix) {
			names = append(names, name)
		}
	}
	return env, names
}

// knobProblem turns a parse error of knob k into a Problem.
func knobProblem(k Knob, v string, err error) Problem {
	p := Problem{Name: k.Name, Value: v, Expected: k.Expected}
	if !errors.Is(err, errBad) {
		p.Detail = err.Error()
	}
	return p
}

// resolve computes the "auto" values once every knob is parsed.
func resolve(c *Config, l *loader) {
	if c.Blocks == 0 {
		c.Blocks = defaultBlocks
		if c.Channel == ChannelDirect {
			c.Blocks = autoBlocks(l.sendBuf, c.BlockSize)
		}
	}
	if c.Credits == 0 {
		c.Credits = max(1, c.Blocks/4)
	}
	if c.VirtualWindow == 0 {
		c.VirtualWindow = max(c.BlockSize, c.ChannelBytes()/4)
	}
	switch {
	case !c.Preempt:
		c.PreemptChunk = 0
	case c.PreemptChunk == 0:
		c.PreemptChunk = c.BlockSize
	}
}

// Getenv returns the value of name in environ with Load's rules: the
// first entry of a name wins. ok is false when name is absent.
func Getenv(environ []string, name string) (value string, ok bool) {
	for _, kv := range environ {
		if n, v, found := strings.Cut(kv, "="); found && n == name {
			return v, true
		}
	}
	return "", false
}

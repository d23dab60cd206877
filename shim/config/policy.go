package config

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sirupsen/logrus"
)

// Fallback applies sdpshim's policy to a Load result: a configuration
// with any problem disables the shim, and the program runs on plain TCP.
// It returns c unchanged and reason "" when err is nil; otherwise c with
// Enabled false and reason = err.Error(), one line per problem. The
// logging fields of c stay usable (a bad logging knob has its default),
// so the reason can be logged where the user asked.
func Fallback(c Config, err error) (Config, string) {
	if err == nil {
		return c, ""
	}
	c.Enabled = false
	return c, err.Error()
}

// Runtime is what a shimmed process runs with: the configuration after
// Fallback, and its logger.
type Runtime struct {
	// Config is the configuration; Config.Enabled is false when Reason
	// is set or SDPSHIM_ENABLE=0.
	Config Config
	// Reason says why the configuration was rejected, one line per
	// problem; "" when it was accepted.
	Reason string
	// Log is the logger built by OpenLog; never nil.
	Log *logrus.Logger
	// LogFile is the open log file, nil when logging to stderr or off.
	// Close closes it.
	LogFile *os.File
}

// Open loads the configuration from environ, applies Fallback, and opens
// the log. A log file that cannot be opened is one more configuration
// problem. When there are problems, Open reports each one once, as one
// line: through the logger when it logs errors, else straight to stderr,
// because a silent typo would turn acceleration off unnoticed. Open never
// panics and never fails; the caller checks Config.Enabled.
func Open(environ []string) Runtime {
	return open(environ, os.Geteuid(), os.Stderr)
}

// open is Open with the uid and stderr passed in, for tests.
func open(environ []string, uid int, stderr io.Writer) Runtime {
	c, err := load(environ, uid, KernelSendBuf())
	c, reason := Fallback(c, err)
	log, file, err := openLog(c, stderr)
	if err != nil {
		var more string
		c, more = Fallback(c, err)
		reason = strings.TrimPrefix(reason+"\n"+more, "\n")
	}
	rt := Runtime{Config: c, Reason: reason, Log: log, LogFile: file}
	if reason != "" {
		rt.report(stderr)
	}
	return rt
}

// report writes Reason, one entry or line per problem.
func (rt Runtime) report(stderr io.Writer) {
	for _, line := range strings.Split(rt.Reason, "\n") {
		if rt.Log.IsLevelEnabled(logrus.ErrorLevel) {
			rt.Log.Error(line)
		} else {
			fmt.Fprintln(stderr, line)
		}
	}
}

// Close closes the log file, if any. The logger must not be used after.
func (rt Runtime) Close() error {
	if rt.LogFile == nil {
		return nil
	}
	return rt.LogFile.Close()
}

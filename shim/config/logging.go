package config

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/sirupsen/logrus"
)

// Logrus returns the logrus level of l, and false for LogOff or an
// unknown level.
func (l LogLevel) Logrus() (logrus.Level, bool) {
	if l == LogOff {
		return 0, false
	}
	level, err := logrus.ParseLevel(string(l))
	return level, err == nil
}

// OpenLog builds the logger c asks for.
//
// With SDPSHIM_LOG_LEVEL off (the default) the logger is silent: output
// is discarded and only the panic level is enabled, so a disabled call
// (Debug, Info, ... Fatal) returns before formatting anything. With a
// level, entries go to stderr or to c.LogFile, opened
// O_WRONLY|O_CREATE|O_APPEND|O_CLOEXEC with mode 0600, one Write per
// entry, each tagged with the writing process's pid.
//
// The logger's Fatal never exits: a shim must not end its host program.
// Panic still panics; the shim does not call it.
//
// file is the opened log file, nil when none; the caller owns it (closes
// it, and protects its descriptor from the host program). When the file
// cannot be opened, OpenLog returns a logger that writes to stderr at the
// requested level, a nil file, and an *Error naming SDPSHIM_LOG_FILE.
func OpenLog(c Config) (log *logrus.Logger, file *os.File, err error) {
	return openLog(c, os.Stderr)
}

// openLog is OpenLog with stderr passed in, for tests.
func openLog(c Config, stderr io.Writer) (*logrus.Logger, *os.File, error) {
	log := logrus.New()
	log.ExitFunc = func(int) {}
	log.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})
	level, on := c.LogLevel.Logrus()
	if !on {
		log.SetOutput(io.Discard)
		log.SetLevel(logrus.PanicLevel)
		return log, nil, nil
	}
	log.SetLevel(level)
	log.AddHook(pidHook{})
	log.SetOutput(stderr)
	if c.LogFile == "" {
		return log, nil, nil
	}
	f, err := os.OpenFile(c.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		detail := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			detail = "open: " + pe.Err.Error()
		}
		return log, nil, &Error{Problems: []Problem{{
			Name: "SDPSHIM_LOG_FILE", Value: c.LogFile,
			Expected: "a file this process can append to", Detail: detail,
		}}}
	}
	log.SetOutput(f)
	return log, f, nil
}

// pidHook tags every entry with the pid of the process writing it: many
// shimmed processes may share one log file.
type pidHook struct{}

func (pidHook) Levels() []logrus.Level { return logrus.AllLevels }

func (pidHook) Fire(e *logrus.Entry) error {
	e.Data["pid"] = os.Getpid()
	return nil
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit codes shared by every command.
const (
	exitOK      = 0 // success
	exitFailure = 1 // the command ran and found something wrong
	exitUsage   = 2 // bad command line
)

// Env is what a command sees of its process; tests pass a fake one.
type Env struct {
	Stdout, Stderr io.Writer
	// Environ is the environment, "NAME=value" strings as os.Environ
	// returns them.
	Environ []string
}

// Command is one subcommand of sdpshim.
type Command struct {
	// Name is the word that selects the command.
	Name string
	// Summary is one line for the command list.
	Summary string
	// Usage is the synopsis, e.g. "sdpshim env [--markdown]".
	Usage string
	// Help is longer text for `sdpshim help NAME`, flags included; may be "".
	Help string
	// Run executes the command with the arguments after its name and
	// returns the exit code.
	Run func(env *Env, args []string) int
}

// commands holds every registered command by name.
var commands = map[string]*Command{}

// register adds c to the commands. It is called from init functions; a
// duplicate or incomplete command is a programming error and panics at
// start-up, before any input is read.
func register(c *Command) {
	if c.Name == "" || c.Run == nil || c.Usage == "" {
		panic("sdpshim: incomplete command " + c.Name)
	}
	if _, dup := commands[c.Name]; dup {
		panic("sdpshim: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// printCommands writes the command list.
func printCommands(w io.Writer) {
	names := make([]string, 0, len(commands))
	width := 0
	for name := range commands {
		names = append(names, name)
		width = max(width, len(name))
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: sdpshim COMMAND [ARGS]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, name := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, name, commands[name].Summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'sdpshim help COMMAND' for a command's usage.")
}

// printUsage writes c's synopsis and help text.
func (c *Command) printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n", c.Usage)
	if c.Help != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, strings.TrimRight(c.Help, "\n"))
	}
}

// flags returns a flag set for c that reports errors on env.Stderr.
func (c *Command) flags(env *Env) *flag.FlagSet {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() { c.printUsage(env.Stderr) }
	return fs
}

// parse parses args into fs. done is true when the command must stop
// with code: -h (exit 0, usage printed) or a bad flag (exit 2).
func parse(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return exitOK, false
	case errors.Is(err, flag.ErrHelp):
		return exitOK, true
	}
	return exitUsage, true
}

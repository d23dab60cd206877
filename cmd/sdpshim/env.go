package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/sdpshim/sdpshim/shim/config"
)

func init() {
	register(&Command{
		Name:    "env",
		Summary: "print every SDPSHIM_* setting: default, current value, meaning",
		Usage:   "sdpshim env [--markdown]",
		Help: `Prints every knob with its default, its value in the current environment
(marked "(invalid)" when the shim would reject it) and its meaning, then
one line per problem. Exits 1 when the environment has problems: a shim
started with it would disable itself and leave programs on plain TCP.

  --markdown  print the README table of every knob (name, default,
              allowed values, meaning) instead, and ignore the environment`,
		Run: runEnv,
	})
}

// runEnv implements `sdpshim env`.
func runEnv(env *Env, args []string) int {
	cmd := commands["env"]
	fs := cmd.flags(env)
	markdown := fs.Bool("markdown", false, "print the README table")
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "sdpshim env: unexpected argument %q\n", fs.Arg(0))
		cmd.printUsage(env.Stderr)
		return exitUsage
	}
	if *markdown {
		fmt.Fprint(env.Stdout, config.Markdown())
		return exitOK
	}

	_, err := config.Load(env.Environ)
	var cerr *config.Error
	if err != nil && !errors.As(err, &cerr) {
		fmt.Fprintf(env.Stderr, "sdpshim env: %v\n", err) // Load returns only *Error today
		return exitFailure
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tCURRENT\tMEANING")
	for _, k := range config.Knobs() {
		current := "-"
		if v, ok := config.Getenv(env.Environ, k.Name); ok && strings.TrimSpace(v) != "" {
			current = shown(v)
		}
		if cerr != nil && cerr.Has(k.Name) {
			current += " (invalid)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Name, k.ShownDefault(), current, k.Meaning)
	}
	tw.Flush()
	if cerr == nil {
		return exitOK
	}
	fmt.Fprintln(env.Stdout)
	for _, p := range cerr.Problems {
		fmt.Fprintf(env.Stdout, "sdpshim: %s\n", p)
	}
	fmt.Fprintf(env.Stdout, "sdpshim: with this environment %s\n", config.Consequence)
	return exitFailure
}

// maxShown bounds how much of a current value the table shows.
const maxShown = 40

// shown returns v for a table cell: as is when short and plain, else
// quoted (so tabs and newlines cannot break the columns) and clipped.
func shown(v string) string {
	plain := len(v) <= maxShown
	for _, r := range v {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			plain = false
			break
		}
	}
	if plain {
		return v
	}
	if len(v) > maxShown {
		v = strings.ToValidUTF8(v[:maxShown], "") + "..."
	}
	return strconv.Quote(v)
}

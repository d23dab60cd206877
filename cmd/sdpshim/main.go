package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], &Env{Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ()}))
}

// run dispatches args (without the program name) to a command and returns
// the exit code.
func run(args []string, env *Env) int {
	if len(args) == 0 {
		printCommands(env.Stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	}
	cmd, ok := commands[name]
	if !ok {
		if strings.HasPrefix(name, "-") {
			fmt.Fprintf(env.Stderr, "sdpshim: unknown flag %s before the command; run 'sdpshim help'\n", name)
		} else {
			fmt.Fprintf(env.Stderr, "sdpshim: unknown command %q; run 'sdpshim help'\n", name)
		}
		return exitUsage
	}
	return cmd.Run(env, args[1:])
}

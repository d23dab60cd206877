package main

import "fmt"

func init() {
	register(&Command{
		Name:    "help",
		Summary: "list the commands, or show one command's usage",
		Usage:   "sdpshim help [COMMAND]",
		Run:     runHelp,
	})
}

// runHelp prints the command list, or the usage of the command named.
func runHelp(env *Env, args []string) int {
	switch len(args) {
	case 0:
		printCommands(env.Stdout)
		return exitOK
	case 1:
		cmd, ok := commands[args[0]]
		if !ok {
			fmt.Fprintf(env.Stderr, "sdpshim help: unknown command %q\n", args[0])
			return exitUsage
		}
		cmd.printUsage(env.Stdout)
		return exitOK
	}
	fmt.Fprintln(env.Stderr, "usage: sdpshim help [COMMAND]")
	return exitUsage
}

// Command sdpshim is the sdpshim command line: `sdpshim COMMAND [ARGS]`.
//
// Each subcommand lives in its own file (env.go, help.go, ...) and
// registers itself from an init function with register (command.go).
// Adding one is adding a file:
//
//	func init() {
//		register(&Command{
//			Name:    "stats",
//			Summary: "show the stats of shimmed processes",
//			Usage:   "sdpshim stats [--json | --prom] [PID]",
//			Run:     runStats,
//		})
//	}
//
// Exit codes: 0 success, 1 failure (for env: the environment holds invalid
// settings), 2 usage error.
package main

// Package config holds every SDPSHIM_* setting of sdpshim: one table of
// knobs (knobs.go) with each variable's name, default, allowed values and
// meaning, parsed and validated once from an environment into a typed
// Config. The preload core, the shim and the sdpshim CLI all read their
// settings through this package and nowhere else.
//
// Rules, decided here for the whole product:
//
//   - The environment is passed in ("NAME=value" strings, as os.Environ
//     returns them); Load never reads the process environment itself, so
//     the C interposer can hand over the environment it sees. When a name
//     appears twice, the first one wins, as with getenv(3).
//   - A variable that is set but empty, or only blanks, counts as unset.
//     Surrounding blanks are trimmed.
//   - Every SDPSHIM_* variable must be a known knob: an unknown one (a typo
//     such as SDPSHIM_BLOKS) is a configuration error like a bad value.
//     Names that start with "SDPSHIM__" (two underscores) are reserved for
//     private plumbing between the CLI, the interposer and the core, and
//     are ignored here.
//   - Load has no side effects: it opens, creates and checks no file.
//     OpenLog opens the log file; rendezvous.EnsureRunDir creates and checks
//     the run directory (the one rule: owned by the user, mode 0700).
//   - A bad configuration never crashes the host program. Load reports
//     every problem at once (Error, one line per problem: variable, value,
//     what was expected). Fallback and Open apply the product's policy: the
//     shim disables itself, says why once, and the program runs on plain
//     TCP.
//
// Adding a knob: add a field to Config, a row to the table in knobs.go,
// cross-field checks to crossCheck (load.go) if any, tests, and regenerate
// the README table with `go run ./cmd/sdpshim env --markdown` (or
// `go test ./shim/config -run TestREADMETable -update`).
package config

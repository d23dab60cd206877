// Package tests holds sdpshim's integration tests: the layering rules of
// the code base, and real programs (curl, python, redis, nginx, ...) run
// under the shim and compared with the same programs on kernel TCP. Tests
// that need tools .ci/run installs skip with a clear reason when a tool is
// missing on a developer machine, and fail in CI (CI=true).
package tests

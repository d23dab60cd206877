// Package doorbell implements the wait.Doorbell contract over a Link
// (Bells): arm tokens on a board the peer writes, rings as
// WRITE_WITH_IMM on the Link's doorbell queue pair, and one sleeper at a
// time leading the wait on its completion queue for the others. The
// status-byte transport's data and space doorbells are Bells.
//
// It imports core/setup and the layers below it.
package doorbell

// Package wait is how a core goroutine or a caller's thread waits for its
// peer (docs/waiting.md). It declares the two contracts of waiting,
// Doorbell (arm, check, sleep) and WaitPolicy (how long to poll before
// sleeping), and holds their users and implementations that need no
// provider: the Waiter, the busy, event, hybrid and adaptive policies,
// ParkFD (sleeping on a descriptor with the Go runtime's help) and WaitFD.
// Doorbells over a provider live in core/doorbell.
//
// It imports only core/fdhook.
package wait

package coretest

// testCase is one contract check written once as its two sides. Side A
// runs in the test process; side B runs beside it (in-process) or in the
// peer process (cross-process), so both modes share the code.
type testCase struct {
	name string
	a, b func(*side)
	// crossOnly marks a case that needs side B in a process of its own
	// (it kills it).
	crossOnly bool
}

// cases is the suite, in the order it runs.
var cases = []testCase{
	{name: "ProviderBasics", a: basicsA, b: idle},
	{name: "PostBeforePeerConnect", a: earlyPostA, b: earlyPostB},
	{name: "WriteThenFlag", a: writeFlagA, b: writeFlagB},
	{name: "ReadSeesLatestWrite", a: readLatestA, b: readLatestB},
	{name: "SendRecvSizes", a: sendSizesA, b: sendSizesB},
	{name: "SendWaitsForRecv", a: rnrA, b: rnrB},
	{name: "WriteWithImmConsumesRecv", a: immA, b: immB},
	{name: "PostListChains", a: chainA, b: chainB},
	{name: "QueueFull", a: queueFullA, b: queueFullB},
	{name: "UnsignaledCompletions", a: unsignaledA, b: unsignaledB},
	{name: "CQOverrun", a: overrunA, b: overrunB},
	{name: "ConcurrentPosts", a: concA, b: concB},
	{name: "NotifyFD", a: notifyA, b: notifyB},
	{name: "PeerProcessKilled", a: peerKilledA, b: peerKilledB, crossOnly: true},
	{name: "PeerQPClosed", a: peerClosedA, b: peerClosedB},
	{name: "CloseFlushesOutstanding", a: closeFlushA, b: closeFlushB},
	{name: "MalformedRequests", a: malformedA, b: malformedB},
	{name: "RegionAfterConnect", a: lateRegionA, b: lateRegionB},
	{name: "RegionsStayInTheirDomain", a: domainsA, b: domainsB},
}

func caseNamed(name string) (testCase, bool) {
	for _, c := range cases {
		if c.name == name {
			return c, true
		}
	}
	return testCase{}, false
}

// idle is the side of a case that needs no peer activity.
func idle(*side) {}

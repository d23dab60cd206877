package stats

import "github.com/sdpshim/sdpshim/core/wait"

// ChannelInfo describes a channel (the shared region two processes'
// streams ride on) when it is registered.
type ChannelInfo struct {
	ID        uint64 `json:"id"`        // chosen by the caller, unique in the process; ConnInfo.Channel refers to it
	PeerPID   int    `json:"peer_pid"`  // 0 when unknown
	Transport string `json:"transport"` // "statusbyte" or "slidingwindow"
	Blocks    int    `json:"blocks"`    // blocks per direction
	BlockSize int    `json:"block_size"`
}

// ChannelStats are a channel's counters, read by the function given to
// AddChannel.
type ChannelStats struct {
	BlocksInUse    uint64 `json:"blocks_in_use"`  // receive-ring blocks holding data not consumed yet (received less released)
	ReadSyncs      uint64 `json:"read_syncs"`     // READs of the peer's status array
	RetainedSkips  uint64 `json:"retained_skips"` // slots passed over: the peer retains them
	BlocksSent     uint64 `json:"blocks_sent"`
	BlocksReceived uint64 `json:"blocks_received"`
	SendFull       uint64 `json:"send_full"` // sends that found no free block
}

type channelSource struct {
	info ChannelInfo
	read func() ChannelStats
}

type waiterSource struct {
	name string
	read func() wait.WaiterStats
}

// AddChannel registers a channel; read returns its counters and must not
// block (it is called with the registry's lock held). remove unregisters
// it; calling it twice is harmless.
func (r *Registry) AddChannel(info ChannelInfo, read func() ChannelStats) (remove func()) {
	src := &channelSource{info: info, read: read}
	r.mu.Lock()
	r.chans[src] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.chans, src)
		r.mu.Unlock()
	}
}

// AddWaiter registers a waiter under name (e.g. "progress", or a channel
// id); read is typically (*wait.Waiter).Stats and must not block.
// remove unregisters it.
func (r *Registry) AddWaiter(name string, read func() wait.WaiterStats) (remove func()) {
	src := &waiterSource{name: name, read: read}
	r.mu.Lock()
	r.waits[src] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.waits, src)
		r.mu.Unlock()
	}
}

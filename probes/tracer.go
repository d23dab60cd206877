package probes

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Probe function names (c/probe.h).
const (
	SymbolFallback    = "sdpshim_probe_fallback"
	SymbolAccelerated = "sdpshim_probe_accelerated"
)

// ErrNotPermitted: the kernel refused to load or attach the programs for
// lack of privilege (run as root).
var ErrNotPermitted = errors.New("eBPF tracing needs root (CAP_BPF and CAP_PERFMON)")

// Options configure Load.
type Options struct {
	// Library is the ELF file whose probe functions get uprobes: the core
	// library, or any program linked with c/probe.c. "" attaches none.
	Library string
	// Interposer is the interposer library (libsdpshim.so), whose own
	// sdpshim_probe_fallback reports the fallbacks it decides without the
	// core (codes 64 and up, e.g. shim-off). "" attaches none.
	Interposer string
}

// Tracer holds the loaded programs, their links and the event reader.
type Tracer struct {
	objs   traceObjects
	links  []link.Link
	events *ringbuf.Reader
}

// Load loads and attaches the programs. It fails with ErrNotPermitted
// when not privileged, and with a wrapped error when the kernel lacks a
// tracepoint or the library lacks the probe symbols.
func Load(o Options) (*Tracer, error) {
	if err := rlimit.RemoveMemlock(); err != nil && os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: %v", ErrNotPermitted, err)
	}
	t := &Tracer{}
	if err := loadTraceObjects(&t.objs, nil); err != nil {
		return nil, permission(fmt.Errorf("load eBPF programs: %w", err))
	}
	if err := t.attach(o); err != nil {
		t.Close()
		return nil, permission(err)
	}
	r, err := ringbuf.NewReader(t.objs.Events)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("ring buffer: %w", err)
	}
	t.events = r
	return t, nil
}

func (t *Tracer) attach(o Options) error {
	for _, tp := range []*ebpf.Program{t.objs.SockSend, t.objs.SockRecv, t.objs.SockState} {
		l, err := link.AttachTracing(link.TracingOptions{Program: tp, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return fmt.Errorf("attach %s: %w", tp, err)
		}
		t.links = append(t.links, l)
	}
	if o.Library != "" {
		if err := t.uprobes(o.Library, map[string]*ebpf.Program{SymbolFallback: t.objs.ProbeFallback, SymbolAccelerated: t.objs.ProbeAccelerated}); err != nil {
			return err
		}
	}
	if o.Interposer != "" {
		return t.uprobes(o.Interposer, map[string]*ebpf.Program{SymbolFallback: t.objs.ProbeFallback})
	}
	return nil
}

// uprobes attaches progs to the named functions of the ELF file path.
func (t *Tracer) uprobes(path string, progs map[string]*ebpf.Program) error {
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return fmt.Errorf("uprobe target: %w", err)
	}
	for sym, prog := range progs {
		l, err := ex.Uprobe(sym, prog, nil)
		if err != nil {
			return fmt.Errorf("uprobe %s in %s: %w", sym, path, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

// permission wraps err with ErrNotPermitted when the kernel said EPERM
// (EACCES is the verifier rejecting a program: a bug, not a privilege).
func permission(err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w: %w", ErrNotPermitted, err)
	}
	return err
}

// Close detaches and releases everything; a blocked ReadEvent returns
// ErrClosed.
func (t *Tracer) Close() error {
	var errs []error
	if t.events != nil {
		errs = append(errs, t.events.Close())
	}
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}

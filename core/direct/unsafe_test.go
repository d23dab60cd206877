package direct

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func uintptrOf(p *uint32) uintptr           { return uintptr(unsafe.Pointer(p)) }
func uintptrOfTS(ts *unix.Timespec) uintptr { return uintptr(unsafe.Pointer(ts)) }

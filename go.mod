module github.com/sdpshim/sdpshim

go 1.26.0

toolchain go1.26.8

require (
	github.com/sirupsen/logrus v1.10.2 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

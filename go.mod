module github.com/sdpshim/sdpshim

go 1.26.0

toolchain go1.26.8

require golang.org/x/sys v0.49.0

require github.com/sirupsen/logrus v1.10.2
